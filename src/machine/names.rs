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
        let names: Vec<&str> = Shortfall::ALL.iter().map(|p| p.name()).collect();
        Shortfall::ALL
            .into_iter()
            .find(|p| p.name() == s.trim())
            .ok_or_else(|| unknown("shortfall policy", s, &names))
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
        let names: Vec<&str> = Launcher::ALL.iter().map(|l| l.name()).collect();
        Launcher::from_name(s.trim()).ok_or_else(|| unknown("launcher file", s, &names))
    }
}

fn unknown(what: &'static str, text: &str, names: &[&str]) -> Error {
    Error::BadSpec {
        what,
        text: text.chars().take(200).collect(),
        problem: format!("expected one of {}", names.join(", ")),
    }
}
