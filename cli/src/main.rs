//! `rank-layout`: print a layout's groups, or one rank's view of them.
//!
//! A thin consumer of the library: flags become a [`Config`] in one place
//! ([`LayoutArgs::config`]), the library does the rest. Invalid input prints
//! the error on stderr and exits with status 2.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use rank_layout::{Config, Error, Kind, Layout};

mod report;

use report::{LayoutReport, RankReport};

/// Process-group rank layouts of distributed training (Megatron-LM ordering).
#[derive(Debug, Parser)]
#[command(name = "rank-layout", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the groups of every kind (or of the --kind given).
    Groups {
        #[command(flatten)]
        layout: LayoutArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Print one rank's coordinates and groups, computed arithmetically.
    Rank {
        /// The rank.
        rank: u64,
        #[command(flatten)]
        layout: LayoutArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Args)]
struct LayoutArgs {
    /// Tensor-parallel size (default 1).
    #[arg(long)]
    tp: Option<u32>,
    /// Context-parallel size (default 1).
    #[arg(long)]
    cp: Option<u32>,
    /// Expert-parallel size (default 1).
    #[arg(long)]
    ep: Option<u32>,
    /// Data-parallel size (default: derived from --world-size, else 1).
    #[arg(long)]
    dp: Option<u32>,
    /// Pipeline-parallel size (default 1).
    #[arg(long)]
    pp: Option<u32>,
    /// World size: derives dp, or is checked against it.
    #[arg(long)]
    world_size: Option<u32>,
    /// Axis order, first fastest (default tp-cp-ep-dp-pp).
    #[arg(long)]
    order: Option<String>,
    /// First rank (default 0).
    #[arg(long)]
    rank_offset: Option<u32>,
    /// Encoder tensor-parallel size: makes an encoder + decoder layout.
    #[arg(long)]
    encoder_tp: Option<u32>,
    /// Encoder pipeline-parallel size: makes an encoder + decoder layout.
    #[arg(long)]
    encoder_pp: Option<u32>,
    /// nested (default) or folded.
    #[arg(long)]
    expert_layout: Option<String>,
    /// Expert tensor-parallel size (folded; default tp).
    #[arg(long)]
    etp: Option<u32>,
    /// Hierarchical context-parallel sizes, innermost first: S0,S1,...
    #[arg(long)]
    hierarchical_cp: Option<String>,
    /// Distributed-optimizer instances (folded).
    #[arg(long)]
    dist_opt_instances: Option<u32>,
    /// A JSON file with the same keys (snake_case); flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
struct OutputArgs {
    /// A kind to print (repeatable); default: every kind of the layout.
    #[arg(long = "kind")]
    kinds: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

impl LayoutArgs {
    /// The configuration file, overridden by the flags.
    fn config(&self) -> Result<Config, Error> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| Error::InvalidConfig {
                    message: format!("{}: {e}", path.display()),
                })?;
                serde_json::from_str(&text).map_err(|e| Error::InvalidConfig {
                    message: format!("{}: {e}", path.display()),
                })?
            }
            None => Config::default(),
        };
        let set = |field: &mut u32, flag: Option<u32>| {
            if let Some(v) = flag {
                *field = v;
            }
        };
        set(&mut c.tp, self.tp);
        set(&mut c.cp, self.cp);
        set(&mut c.ep, self.ep);
        set(&mut c.pp, self.pp);
        set(&mut c.rank_offset, self.rank_offset);
        c.dp = self.dp.or(c.dp);
        c.world_size = self.world_size.or(c.world_size);
        c.encoder_tp = self.encoder_tp.or(c.encoder_tp);
        c.encoder_pp = self.encoder_pp.or(c.encoder_pp);
        c.etp = self.etp.or(c.etp);
        c.dist_opt_instances = self.dist_opt_instances.or(c.dist_opt_instances);
        if let Some(order) = &self.order {
            c.order = order.parse()?;
        }
        if let Some(layout) = &self.expert_layout {
            c.expert_layout = layout.parse()?;
        }
        if let Some(levels) = &self.hierarchical_cp {
            let parsed = levels
                .split(',')
                .map(|s| s.trim().parse::<u32>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| Error::InvalidConfig {
                    message: format!(
                        "--hierarchical-cp {levels:?} is not a comma-separated list of sizes"
                    ),
                })?;
            c.hierarchical_cp = Some(parsed);
        }
        Ok(c)
    }
}

impl OutputArgs {
    fn kinds(&self) -> Result<Vec<Kind>, Error> {
        self.kinds.iter().map(|k| k.parse()).collect()
    }
}

/// What went wrong: bad input (exit 2) or output (a closed pipe exits 0).
enum Failure {
    Input(Error),
    Output(io::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Input(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Output(e)
    }
}

fn emit<T: std::fmt::Display + serde::Serialize>(value: &T, format: Format) -> Result<(), Failure> {
    let mut out = BufWriter::new(io::stdout().lock());
    match format {
        Format::Table => write!(out, "{value}")?,
        Format::Json => {
            serde_json::to_writer(&mut out, value).map_err(io::Error::from)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(())
}

fn run(cli: &Cli) -> Result<(), Failure> {
    match &cli.command {
        Command::Groups { layout, output } => {
            let layout = Layout::new(&layout.config()?)?;
            let report = LayoutReport::new(&layout, &output.kinds()?)?;
            emit(&report, output.format)
        }
        Command::Rank {
            rank,
            layout,
            output,
        } => {
            let layout = Layout::new(&layout.config()?)?;
            let first = layout.rank_offset();
            let rank = u32::try_from(*rank).map_err(|_| Error::RankOutOfRange {
                rank: *rank,
                first,
                end: u64::from(first) + u64::from(layout.world_size()),
            })?;
            let report = RankReport::new(&layout, rank, &output.kinds()?)?;
            emit(&report, output.format)
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(Failure::Output(e)) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
