//! Layers: `Linear` (weight and optional bias) and an MLP of linear layers with relu between them. Their
//! parameters are `Arc<Tensor>`s in the session's pool, shared with the tape during a forward pass.

use std::sync::Arc;

use crate::autograd::{Tape, Var};
use crate::error::Result;
use crate::session::Session;
use crate::tensor::Tensor;

/// `y = x·W (+ b)`, with W of shape [inputs, outputs].
pub struct Linear {
    pub weight: Arc<Tensor>,
    pub bias: Option<Arc<Tensor>>,
}

impl Linear {
    /// Glorot-uniform weights from `seed` (and a zero bias, if asked for).
    pub fn new(
        session: &Session,
        inputs: usize,
        outputs: usize,
        bias: bool,
        seed: u64,
    ) -> Result<Self> {
        let limit = (6.0 / (inputs + outputs).max(1) as f64).sqrt() as f32;
        let weight = session.empty(&[inputs, outputs])?;
        weight.fill_uniform_(seed, -limit, limit)?;
        let bias = if bias {
            Some(Arc::new(session.zeros(&[outputs])?))
        } else {
            None
        };
        Ok(Self {
            weight: Arc::new(weight),
            bias,
        })
    }

    /// A layer over given tensors.
    pub fn from_tensors(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self {
            weight: Arc::new(weight),
            bias: bias.map(Arc::new),
        }
    }

    /// Records `x·W (+ b)` on the tape.
    pub fn forward(&self, tape: &mut Tape, x: Var) -> Result<Var> {
        let weight = tape.param(&self.weight);
        let product = tape.matmul(x, weight)?;
        match &self.bias {
            Some(bias) => {
                let bias = tape.param(bias);
                tape.add(product, bias)
            }
            None => Ok(product),
        }
    }

    pub fn parameters(&self) -> Vec<Arc<Tensor>> {
        std::iter::once(Arc::clone(&self.weight))
            .chain(self.bias.iter().cloned())
            .collect()
    }
}

/// Linear layers with relu between them (none after the last).
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    /// Layers `inputs → hidden[0] → … → outputs`, each with a bias, weights from `seed`.
    pub fn new(
        session: &Session,
        inputs: usize,
        hidden: &[usize],
        outputs: usize,
        seed: u64,
    ) -> Result<Self> {
        let sizes: Vec<usize> = std::iter::once(inputs)
            .chain(hidden.iter().copied())
            .chain([outputs])
            .collect();
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(index, pair)| {
                Linear::new(
                    session,
                    pair[0],
                    pair[1],
                    true,
                    seed.wrapping_add(index as u64),
                )
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    pub fn forward(&self, tape: &mut Tape, x: Var) -> Result<Var> {
        let mut current = x;
        for (index, layer) in self.layers.iter().enumerate() {
            current = layer.forward(tape, current)?;
            if index + 1 < self.layers.len() {
                current = tape.relu(current)?;
            }
        }
        Ok(current)
    }

    pub fn parameters(&self) -> Vec<Arc<Tensor>> {
        self.layers.iter().flat_map(Linear::parameters).collect()
    }
}
