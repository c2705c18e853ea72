//! A digit of the pipeline index that an encoder's and a decoder's grids
//! share: what the encoder + decoder join ([`pp_group_mapper`]) and the
//! count of where joined groups fall ([`spread`]) both read.
//!
//! [`pp_group_mapper`]: crate::plan::pp_group_mapper
//! [`spread`]: crate::plan::spread

/// One digit of the pipeline index shared by both grids (a cp or dp axis):
/// its size and its stride in the encoder and in the decoder grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shared {
    pub size: u32,
    pub strides: [u32; 2],
}
