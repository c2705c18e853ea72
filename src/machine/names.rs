//! The names of the placement's choices, as the command line and Python
//! write them: a [`Shortfall`] policy (`straddle`, `shrink`, `fail`) and a
//! [`Launcher`] file (`slurm-hostfile`, ...), with `Display` and
//! `FromStr`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::machine::launcher::Launcher;
use crate::machine::place::Shortfall;

impl Shortfall {
    /// Every policy, in the order of their names.
    pub const ALL: [Shortfall; 3] = [Shortfall::Straddle, Shortfall::Shrink, Shortfall::Fail];

    /// Its name: `straddle`, `shrink` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            Shortfall::Straddle => "straddle",
            Shortfall::Shrink => "shrink",
            Shortfall::Fail => "fail",
        }
    }

    /// What it does, in one line (for help texts).
    pub fn about(self) -> &'static str {
        match self {
            Shortfall::Straddle => "every rank used; the fewest units straddle domains",
            Shortfall::Shrink => {
                "a smaller job (fewer data-parallel replicas) that fits whole; layouts only"
            }
            Shortfall::Fail => "no placement (an error)",
        }
    }
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Shortfall {
    type Err = Error;

    /// The policy named `s`.
    ///
    /// ```
    /// use rank_layout::machine::Shortfall;
    /// assert_eq!("shrink".parse::<Shortfall>()?, Shortfall::Shrink);
    /// assert!("squeeze".parse::<Shortfall>().is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Shortfall> {
        by_name("shortfall policy", &Shortfall::ALL, Shortfall::name, s)
    }
}

impl Launcher {
    /// What its file is, in one line (for help texts).
    pub fn about(self) -> &'static str {
        match self {
            Launcher::SlurmHostfile => "Slurm's SLURM_HOSTFILE (srun --distribution=arbitrary)",
            Launcher::Rankfile => "an Open MPI rankfile",
            Launcher::Torchrun => "torchrun's host -> --node-rank table (--rdzv-backend=static)",
            Launcher::Dlrover => "dlrover's {host: domain} JSON",
            Launcher::DeviceMesh => {
                "a rank map for torch DeviceMesh's mesh= tensor (entry r: the rank, launched in host name order, that plays logical rank r)"
            }
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Launcher {
    type Err = Error;

    /// The launcher file named `s` (see [`Launcher::name`]).
    ///
    /// ```
    /// use rank_layout::machine::Launcher;
    /// assert_eq!("rankfile".parse::<Launcher>()?, Launcher::Rankfile);
    /// assert!("hostfile".parse::<Launcher>().is_err());
    /// # Ok::<(), rank_layout::Error>(())
    /// ```
    fn from_str(s: &str) -> Result<Launcher> {
        by_name("launcher file", &Launcher::ALL, Launcher::name, s)
    }
}

/// The one of `all` named `text` (blanks around it ignored), or the error
/// naming `what`, the text and every name.
pub(crate) fn by_name<T: Copy>(
    what: &'static str,
    all: &[T],
    name: fn(T) -> &'static str,
    text: &str,
) -> Result<T> {
    all.iter()
        .copied()
        .find(|&v| name(v) == text.trim())
        .ok_or_else(|| Error::BadSpec {
            what,
            text: text.chars().take(200).collect(),
            problem: format!(
                "expected one of {}",
                all.iter().map(|&v| name(v)).collect::<Vec<_>>().join(", ")
            ),
        })
}
