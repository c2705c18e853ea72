//! What a command works on, read from its flags: one layout or mesh (a
//! [`Target`], with the setup it was built from), the modules of a
//! `--modules` file (each module a mesh [`Target`]), or inference shards
//! (`--inference-shards`: each shard a layout [`Target`]).

use rank_layout::Topology;

use crate::args::SetupArgs;
use crate::config::Setup;
use crate::error::Failure;
use crate::modules_target::ModulesTarget;
use crate::shards_target::ShardsTarget;
use crate::target::Target;

/// A layout or mesh, a file's modules, or inference shards.
// A command loads one input, so the size of the larger variant costs
// nothing.
#[allow(clippy::large_enum_variant)]
pub enum Input {
    /// A layout or a mesh.
    One {
        /// The setup of the flags and the file.
        setup: Setup,
        /// Its layout or mesh.
        target: Target,
    },
    /// The modules of a `--modules` file.
    Modules {
        /// The machine of the flags (`--gpus-per-node`,
        /// `--nodes-per-domain`).
        topology: Topology,
        /// The modules.
        modules: ModulesTarget,
    },
    /// Inference shards.
    Shards {
        /// The setup of the flags and the file (its machine).
        setup: Setup,
        /// The shards.
        shards: ShardsTarget,
    },
}

impl Input {
    /// The input of `args`: its modules file (checked to come alone), else
    /// the setup of the flags and the file, and its layout or mesh; the
    /// setup's notes (the Megatron-LM arguments used) go to stderr.
    ///
    /// # Errors
    /// Every error of the flags, the files and the layout or mesh.
    pub fn load(args: &SetupArgs) -> Result<Input, Failure> {
        Input::load_with(args, |failure| failure)
    }

    /// [`Input::load`], with `build_error` applied to an error of building
    /// the layout or mesh (to add a command's advice).
    ///
    /// # Errors
    /// Every error of the flags, the files and the layout or mesh.
    pub fn load_with(
        args: &SetupArgs,
        build_error: impl FnOnce(Failure) -> Failure,
    ) -> Result<Input, Failure> {
        if let Some(path) = args.modules_file()? {
            let topology = args.setup()?.topology;
            let modules = ModulesTarget::load(path)?;
            return Ok(Input::Modules { topology, modules });
        }
        let setup = args.setup()?;
        for note in &setup.notes {
            eprintln!("{note}");
        }
        if let Some(input) = &setup.shards {
            let shards = ShardsTarget::build(input, setup.config.world_size)?;
            return Ok(Input::Shards { setup, shards });
        }
        let target = Target::build(&setup).map_err(build_error)?;
        Ok(Input::One { setup, target })
    }
}
