//! Keras's merging layers, each of a graph's two inputs or more ([`SequentialConfig::inputs`]): `Add`,
//! `Subtract`, `Multiply`, `Average` and `Concatenate`, over the tensor ops (broadcasting as they do).
//!
//! [`SequentialConfig::inputs`]: super::SequentialConfig::inputs

use crate::autograd::GradientTape;
use crate::error::{Error, Result};
use crate::op::elementwise::{BinaryOp, UnaryOp};
use crate::tensor::Tensor;

use super::config::ConcatenateConfig;
use super::layers::Layer;

/// How a merging layer combines its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Merging {
    Add,
    Subtract,
    Multiply,
    Average,
    Concatenate { axis: i64 },
}

/// A merging layer: no weights, two inputs or more.
pub(super) struct Merge {
    merging: Merging,
}

impl Merge {
    pub(super) fn new(merging: Merging) -> Self {
        Merge { merging }
    }

    pub(super) fn concatenate(config: &ConcatenateConfig) -> Self {
        Merge::new(Merging::Concatenate { axis: config.axis })
    }

    fn name(&self) -> &'static str {
        match self.merging {
            Merging::Add => "Add",
            Merging::Subtract => "Subtract",
            Merging::Multiply => "Multiply",
            Merging::Average => "Average",
            Merging::Concatenate { .. } => "Concatenate",
        }
    }
}

impl Layer for Merge {
    fn call(&self, _x: &Tensor, _tape: Option<&GradientTape>) -> Result<Tensor> {
        Err(self.inputs_error(1))
    }

    fn call_inputs(&self, inputs: &[Tensor], _tape: Option<&GradientTape>) -> Result<Tensor> {
        let (first, rest) = match inputs {
            [first, rest @ ..] if !rest.is_empty() => (first, rest),
            _ => return Err(self.inputs_error(inputs.len())),
        };
        // Left to right, one op per input, as Keras (and the Python package's layers) combine them: the same
        // order of roundings.
        let fold = |op: BinaryOp| {
            rest.iter()
                .try_fold(first.handle(), |total, next| total.binary(op, next))
        };
        match self.merging {
            Merging::Add => fold(BinaryOp::Add),
            Merging::Multiply => fold(BinaryOp::Mul),
            Merging::Average => {
                let scale = (1.0 / inputs.len() as f64) as f32;
                fold(BinaryOp::Add)?.unary(UnaryOp::MulScalar, scale)
            }
            Merging::Subtract => match rest {
                [second] => first.binary(BinaryOp::Sub, second),
                _ => Err(self.inputs_error(inputs.len())),
            },
            Merging::Concatenate { axis } => {
                let rank = first.shape().len() as i64;
                let at = if axis < 0 { axis + rank } else { axis };
                if !(1..rank).contains(&at) {
                    return Err(Error::Shape {
                        op: "Concatenate",
                        message: format!(
                            "joins along an axis of the samples (1 to {}, or -{} to -1); got axis {axis} of \
                             inputs of shape {:?}",
                            rank - 1,
                            rank - 1,
                            first.shape()
                        ),
                    });
                }
                let parts: Vec<&Tensor> = inputs.iter().collect();
                Tensor::concat(&parts, at as usize)
            }
        }
    }
}

impl Merge {
    fn inputs_error(&self, given: usize) -> Error {
        let wanted = match self.merging {
            Merging::Subtract => "exactly two inputs",
            _ => "two inputs or more",
        };
        Error::Shape {
            op: self.name(),
            message: format!(
                "takes {wanted} (a graph's layer, SequentialConfig::inputs); got {given}"
            ),
        }
    }
}
