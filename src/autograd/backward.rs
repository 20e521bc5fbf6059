//! The reverse walk: from an output's seed down the tape, each node's gradient complete when the walk reaches
//! it, handed to the caller where asked for and passed on through the node's rule (see `rules`).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::op::reduce::ReduceOp;
use crate::ops::reduce::reciprocal_count;
use crate::tensor::Tensor;

use super::rules::reduce_to_shape;
use super::walk::Walk;
use crate::tensor::{Node, Op, Tape, Var};

/// Seeds of at most this many elements are uploaded rather than filled by a pass.
const SEED_UPLOAD_MAX: usize = 1024;

/// Gradients of a scalar with respect to the parameters on a tape.
///
/// The gradients are shared (`Arc`) so that a front end holding them as its own handles (the Python binding's
/// tensors) can hand them to an optimizer without a copy.
pub struct Gradients {
    by_parameter: Vec<(Arc<Tensor>, Arc<Tensor>)>,
}

impl Gradients {
    /// Gradients computed elsewhere, paired with the parameters they are for, so that an optimizer step can
    /// take them: what a front end builds from the gradients of [`GradientTape::gradient`](crate::GradientTape::gradient). A parameter given twice
    /// takes the first pair's gradient, as [`Gradients::of`] looks them up in order.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use wgcompute::{Gradients, Optimizer, Session, SessionOptions, Sgd};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let w = Arc::new(session.full(&[3], 1.0)?);
    /// let dw = Arc::new(session.full(&[3], 0.5)?);
    /// let gradients = Gradients::from_pairs([(Arc::clone(&w), dw)]);
    /// Sgd::new(0.1, 0.0).step(&[Arc::clone(&w)], &gradients)?;
    /// assert_eq!(w.to_vec()?, vec![0.95; 3]);
    /// # Ok(()) }
    /// ```
    pub fn from_pairs(pairs: impl IntoIterator<Item = (Arc<Tensor>, Arc<Tensor>)>) -> Self {
        Self {
            by_parameter: pairs.into_iter().collect(),
        }
    }

    /// The gradient for a parameter watched with
    /// [`GradientTape::watch_parameter`](crate::GradientTape::watch_parameter), if it took part in the result.
    pub fn of(&self, parameter: &Arc<Tensor>) -> Option<&Tensor> {
        self.by_parameter
            .iter()
            .find(|(candidate, _)| Arc::ptr_eq(candidate, parameter))
            .map(|(_, gradient)| &**gradient)
    }

    /// Every (parameter, gradient) pair.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<Tensor>, &Tensor)> {
        self.by_parameter
            .iter()
            .map(|(parameter, gradient)| (parameter, &**gradient))
    }

    /// The gradient of a parameter as the shared handle it is kept in.
    pub fn shared(&self, parameter: &Arc<Tensor>) -> Option<&Arc<Tensor>> {
        self.by_parameter
            .iter()
            .find(|(candidate, _)| Arc::ptr_eq(candidate, parameter))
            .map(|(_, gradient)| gradient)
    }
}

impl Tape {
    /// Differentiates the scalar `output` (checked one element by [`GradientTape::backward`], before it takes
    /// the recording) with respect to every parameter on the tape. The tape is consumed: each intermediate is
    /// dropped (its range returned to the pool) as soon as the walk has passed it.
    ///
    /// [`GradientTape::backward`]: crate::GradientTape::backward
    pub(crate) fn backward(mut self, output: Var) -> Result<Gradients> {
        self.node(output)?;
        let mut walk = self.start_walk(output, None, &[], true)?;
        self.nodes.truncate(output.index + 1);
        self.seed_mean_cross_entropy(output.index, &mut walk)?;
        while let Some(node) = self.nodes.pop() {
            let index = self.nodes.len();
            self.visit(index, &node, &mut walk)?;
            // `node` is dropped here: its value, unless a caller shares it, goes back to the pool.
        }
        let mut by_parameter = walk.by_parameter;
        by_parameter.reverse();
        Ok(Gradients { by_parameter })
    }

    /// The gradients of `output` with respect to each of `sources` (nodes of this tape), in their order, with
    /// the gradient arriving at `output` given (`output_gradient`, of `output`'s shape; `None` is all ones):
    /// `None` for a source `output` does not depend on through ops with a gradient. A non-scalar `output` is
    /// differentiated as the sum of its elements, as TensorFlow's `GradientTape.gradient` does. The tape is
    /// kept, so it can be asked again: what a persistent tape needs. [`Tape::into_gradient`] frees as it goes.
    pub(crate) fn gradient_seeded(
        &self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &[Var],
    ) -> Result<Vec<Option<Tensor>>> {
        let indices = self.source_indices(sources)?;
        let mut walk = self.start_walk(output, output_gradient, &indices, false)?;
        for index in (walk.lowest..=output.index).rev() {
            self.visit(index, &self.nodes[index], &mut walk)?;
        }
        Ok(walk.found)
    }

    /// [`Tape::gradient_seeded`], consuming the tape: as in [`Tape::backward`], each intermediate is dropped as
    /// soon as the walk has passed it, so the walk's peak memory is lower. What a tape asked only once needs.
    pub(crate) fn into_gradient(
        mut self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &[Var],
    ) -> Result<Vec<Option<Tensor>>> {
        let indices = self.source_indices(sources)?;
        let mut walk = self.start_walk(output, output_gradient, &indices, false)?;
        self.nodes.truncate(output.index + 1);
        while self.nodes.len() > walk.lowest {
            let Some(node) = self.nodes.pop() else {
                break;
            };
            let index = self.nodes.len();
            self.visit(index, &node, &mut walk)?;
        }
        Ok(walk.found)
    }

    fn source_indices(&self, sources: &[Var]) -> Result<Vec<usize>> {
        sources
            .iter()
            .map(|&source| self.node(source).map(|_| source.index))
            .collect()
    }

    /// A walk from `output`, its gradient seeded with `output_gradient` (checked to have its shape) or ones.
    fn start_walk<'a>(
        &self,
        output: Var,
        output_gradient: Option<&Tensor>,
        sources: &'a [usize],
        collect_parameters: bool,
    ) -> Result<Walk<'a>> {
        let output_value = &self.node(output)?.value;
        let seed = match output_gradient {
            Some(given) => {
                if given.shape() != output_value.shape() {
                    return Err(Error::Shape {
                        op: "gradient",
                        message: format!(
                            "the output gradient has shape {:?}; the output it seeds has shape {:?}",
                            given.shape(),
                            output_value.shape()
                        ),
                    });
                }
                output_value.expect_same_session("gradient", given)?;
                given.expect_dtype("gradient", crate::dtype::DType::F32)?;
                given.try_clone()?
            }
            // A small seed (a scalar cost's) is written by the queue: no pass of its own.
            None if output_value.len() <= SEED_UPLOAD_MAX => {
                output_value.upload_beside(&vec![1.0; output_value.len()], output_value.shape())?
            }
            None => {
                let ones = output_value.output(
                    "backward",
                    output_value.shape(),
                    crate::dtype::DType::F32,
                )?;
                ones.fill_(1.0)?;
                ones
            }
        };
        let mut gradients: Vec<Option<Tensor>> = (0..=output.index).map(|_| None).collect();
        gradients[output.index] = Some(seed);
        let lowest = if collect_parameters {
            0
        } else {
            sources.iter().copied().min().unwrap_or(usize::MAX)
        };
        let mut readers = vec![0; output.index + 1];
        for node in &self.nodes[..=output.index] {
            for input in node.op.inputs() {
                readers[input] += 1;
            }
        }
        Ok(Walk {
            gradients,
            collect_parameters,
            by_parameter: Vec::new(),
            sources,
            found: sources.iter().map(|_| None).collect(),
            readers,
            through_relu: vec![false; output.index + 1],
            lowest,
        })
    }

    /// Where `output`, seeded with one, is the mean (or sum) of per-row cross-entropies that nothing else
    /// reads, hands the logits their gradient at once: the kernel's row gradient times the reduction's scale,
    /// one pass where spreading the seed over the rows and scaling each row by it take two (the same bits).
    fn seed_mean_cross_entropy(&self, output: usize, walk: &mut Walk<'_>) -> Result<()> {
        let Op::Reduce {
            op: op @ (ReduceOp::Mean | ReduceOp::Sum),
            x: losses,
            axis: None,
        } = self.nodes[output].op
        else {
            return Ok(());
        };
        let Op::SoftmaxCrossEntropy {
            logits,
            gradient: Some(ref gradient),
        } = self.nodes[losses].op
        else {
            return Ok(());
        };
        if walk.readers[losses] != 1 || self.nodes[losses].owner.is_some() {
            return Ok(());
        }
        let scale = match op {
            ReduceOp::Mean => reciprocal_count(self.nodes[losses].value.len()),
            _ => 1.0,
        };
        walk.gradients[output] = None;
        self.accumulate(&mut walk.gradients, logits, gradient.mul_scalar(scale)?)
    }

    /// One step of the reverse walk, at node `index` (`node`, whose inputs all lie below it and are still on
    /// the tape): the gradient that reached it is complete, since every node that uses it lies above. It is
    /// handed out where the caller asked for it, and passed on to the node's inputs unless nothing asked for
    /// lies below.
    fn visit(&self, index: usize, node: &Node, walk: &mut Walk<'_>) -> Result<()> {
        let Some(gradient) = walk.gradients.get_mut(index).and_then(Option::take) else {
            return Ok(());
        };
        if let (true, Some(owner)) = (walk.collect_parameters, &node.owner) {
            walk.by_parameter
                .push((Arc::clone(owner), Arc::new(gradient)));
            return Ok(());
        }
        let passes_on = node.wants_gradient && !matches!(node.op, Op::Leaf) && index > walk.lowest;
        let asked: Vec<usize> = (0..walk.sources.len())
            .filter(|&position| walk.sources[position] == index)
            .collect();
        let gradient = match asked.split_last() {
            None => gradient,
            Some((&last, others)) => {
                for &position in others {
                    walk.found[position] = Some(gradient.try_clone()?);
                }
                if !passes_on {
                    walk.found[last] = Some(gradient);
                    return Ok(());
                }
                walk.found[last] = Some(gradient.try_clone()?);
                gradient
            }
        };
        if !passes_on {
            return Ok(());
        }
        self.propagate(index, node, gradient, walk)
    }

    pub(super) fn accumulate(
        &self,
        gradients: &mut [Option<Tensor>],
        index: usize,
        gradient: Tensor,
    ) -> Result<()> {
        if !self.nodes[index].wants_gradient {
            return Ok(());
        }
        let target_shape = self.nodes[index].value.shape().to_vec();
        let gradient = reduce_to_shape(gradient, &target_shape)?;
        gradients[index] = Some(match gradients[index].take() {
            Some(existing) => existing.add(&gradient)?,
            None => gradient,
        });
        Ok(())
    }
}
