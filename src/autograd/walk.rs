//! The state of a reverse walk, which the backward pass drives and each gradient rule adds to.

use std::sync::Arc;

use crate::tensor::Tensor;

/// The state of one reverse walk over a tape: the gradient reaching each node so far, and what the caller
/// asked for (every parameter's, or the nodes of `sources`).
pub(super) struct Walk<'a> {
    pub(super) gradients: Vec<Option<Tensor>>,
    /// Whether parameters' gradients are collected as they are reached ([`Tape::backward`]).
    pub(super) collect_parameters: bool,
    pub(super) by_parameter: Vec<(Arc<Tensor>, Arc<Tensor>)>,
    /// The node indices whose gradients were asked for, in the caller's order (repeats allowed).
    pub(super) sources: &'a [usize],
    pub(super) found: Vec<Option<Tensor>>,
    /// The lowest node a gradient must reach: below it nothing asked for lies, so the walk stops there.
    pub(super) lowest: usize,
    /// How many operands of the ops on the walk read each node.
    pub(super) readers: Vec<u32>,
    /// The nodes whose gradient arrived already through their own relu: a layer's input gradient, taken
    /// through the relu of the layer below in the same pass.
    pub(super) through_relu: Vec<bool>,
}
