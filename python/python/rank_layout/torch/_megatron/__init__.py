"""The implementation of :mod:`rank_layout.torch.megatron`, one concept a
module, each importing the others' names from where they are defined:

- ``release``: each Megatron-Core release's ``initialize_model_parallel``
  signature and ``parallel_state`` globals, and which release is installed;
- ``nccl``: Megatron-Core's NCCL communicator configuration;
- ``plan``: ``_Plan``, everything decided before a group is made (the
  checks, the layout, the group families);
- ``state``: ``ParallelState``, how it is built from a plan, and the calls
  that install it into ``megatron.core.parallel_state``;
- ``collection``: Megatron-Core's ``ProcessGroupCollection``, of a state
  (the training layout) or of each inference shard.

Import the public names from :mod:`rank_layout.torch.megatron`.
"""
