//! `Linear` (weight and optional bias) and an MLP of linear layers with relu between them, the models of the
//! estimators and the command's MLP fits.

use std::sync::Arc;

use crate::autograd::GradientTape;
use crate::error::{Error, Result};
use crate::op::elementwise::UnaryOp;
use crate::session::Session;
use crate::tensor::Tensor;

use super::Module;

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

    /// `x·W (+ b)`, the parameters watched by `tape`.
    pub fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        self.record(tape, x, None)
    }

    /// `activation(x·W (+ b))`, the parameters watched by `tape`: with a bias and relu (or none), one pass
    /// forward, and backward one for the weight and bias gradients and one for the input gradient (see
    /// [`Tensor::linear`]).
    pub fn forward_activated(
        &self,
        tape: &GradientTape,
        x: &Tensor,
        activation: UnaryOp,
    ) -> Result<Tensor> {
        self.record(tape, x, Some(activation))
    }

    fn record(
        &self,
        tape: &GradientTape,
        x: &Tensor,
        activation: Option<UnaryOp>,
    ) -> Result<Tensor> {
        let weight = tape.watch_parameter(&self.weight)?;
        let bias = self
            .bias
            .as_ref()
            .map(|bias| tape.watch_parameter(bias))
            .transpose()?;
        x.linear(&weight, bias.as_ref(), activation)
    }

    /// `x·W (+ b)` on tensors, without a tape.
    pub fn infer(&self, x: &Tensor) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_deref(), None)
    }

    /// `activation(x·W (+ b))` on tensors, without a tape, as [`Linear::forward_activated`] computes it.
    pub fn infer_activated(&self, x: &Tensor, activation: UnaryOp) -> Result<Tensor> {
        x.linear(&self.weight, self.bias.as_deref(), Some(activation))
    }

    pub fn parameters(&self) -> Vec<Arc<Tensor>> {
        std::iter::once(Arc::clone(&self.weight))
            .chain(self.bias.iter().cloned())
            .collect()
    }
}

/// The activation between an MLP's hidden layers, by scikit-learn's names. Relu is the default and the one
/// fused into the layer's passes; the others are fused the same way where [`Tensor::linear`] fuses them and
/// are separate elementwise ops otherwise (identity is no op at all).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    Identity,
    Logistic,
    Tanh,
    #[default]
    Relu,
}

impl Activation {
    pub fn all() -> [Activation; 4] {
        [
            Activation::Identity,
            Activation::Logistic,
            Activation::Tanh,
            Activation::Relu,
        ]
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Identity => "identity",
            Activation::Logistic => "logistic",
            Activation::Tanh => "tanh",
            Activation::Relu => "relu",
        }
    }

    /// The elementwise op a layer applies after its bias; none for identity.
    pub fn op(self) -> Option<UnaryOp> {
        match self {
            Activation::Identity => None,
            Activation::Logistic => Some(UnaryOp::Sigmoid),
            Activation::Tanh => Some(UnaryOp::Tanh),
            Activation::Relu => Some(UnaryOp::Relu),
        }
    }
}

impl std::fmt::Display for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Activation {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Activation::all()
            .into_iter()
            .find(|activation| activation.name() == text)
            .ok_or_else(|| Error::InvalidArgument {
                what: "activation",
                given: text.to_string(),
                expected: "identity, logistic, tanh or relu".to_string(),
            })
    }
}

/// An [`Mlp`] run with another hidden activation than relu: the same layers and parameters, seen as a
/// [`Module`] whose hidden layers apply `activation`.
pub struct ActivatedMlp<'a> {
    pub mlp: &'a Mlp,
    pub activation: Activation,
}

impl Module for ActivatedMlp<'_> {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        self.mlp.forward_with(tape, x, self.activation)
    }

    fn infer(&self, x: &Tensor) -> Result<Tensor> {
        self.mlp.infer_with(x, self.activation)
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        self.mlp.parameters()
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
        Self::check_sizes(&sizes)?;
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

    /// Checks the widths `[inputs, hidden…, outputs]` of an MLP before any is built: every width at least 1,
    /// and every layer's weights countable in bytes. Pure, so a caller can check before opening a session.
    ///
    /// ```
    /// use wgcompute::Mlp;
    /// assert!(Mlp::check_sizes(&[13, 64, 3]).is_ok());
    /// assert!(Mlp::check_sizes(&[13, 0, 3]).is_err());
    /// assert!(Mlp::check_sizes(&[13, usize::MAX / 2, 3]).is_err());
    /// ```
    pub fn check_sizes(sizes: &[usize]) -> Result<()> {
        let invalid = |expected: &str| Error::InvalidArgument {
            what: "layer widths",
            given: format!("{sizes:?}"),
            expected: expected.to_string(),
        };
        if sizes.len() < 2 {
            return Err(invalid("an input width and an output width at least"));
        }
        if sizes.contains(&0) {
            return Err(invalid("every width at least 1"));
        }
        if let Some(pair) = sizes.windows(2).find(|pair| {
            pair[0]
                .checked_mul(pair[1])
                .and_then(|weights| weights.checked_mul(std::mem::size_of::<f32>()))
                .is_none()
        }) {
            return Err(invalid(&format!(
                "widths whose layers' weights can be counted; a layer of [{}, {}] has more than that",
                pair[0], pair[1]
            )));
        }
        Ok(())
    }

    /// The forward pass, the parameters watched by `tape`: the logits of a batch, ready for a loss and
    /// [`GradientTape::backward`].
    pub fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        self.forward_with(tape, x, Activation::Relu)
    }

    /// [`Mlp::forward`] with `activation` between the hidden layers.
    pub fn forward_with(
        &self,
        tape: &GradientTape,
        x: &Tensor,
        activation: Activation,
    ) -> Result<Tensor> {
        let mut current: Option<Tensor> = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let input = current.as_ref().unwrap_or(x);
            current = Some(match activation.op() {
                Some(op) if index + 1 < self.layers.len() => {
                    layer.forward_activated(tape, input, op)?
                }
                _ => layer.forward(tape, input)?,
            });
        }
        match current {
            Some(output) => Ok(output),
            None => x.try_clone(),
        }
    }

    /// The forward pass on tensors, without a tape: the logits of a batch, say.
    ///
    /// ```
    /// use wgcompute::{Mlp, Session, SessionOptions};
    /// # fn main() -> wgcompute::Result<()> {
    /// let session = Session::open(SessionOptions::default())?;
    /// let model = Mlp::new(&session, 4, &[16], 3, 7)?;
    /// let batch = session.rand(&[10, 4], 1)?;
    /// let classes = model.infer(&batch)?.argmax(Some(1))?;
    /// assert_eq!(classes.to_vec_u32()?.len(), 10);
    /// # Ok(()) }
    /// ```
    pub fn infer(&self, x: &Tensor) -> Result<Tensor> {
        self.infer_with(x, Activation::Relu)
    }

    /// [`Mlp::infer`] with `activation` between the hidden layers.
    pub fn infer_with(&self, x: &Tensor, activation: Activation) -> Result<Tensor> {
        let mut current: Option<Tensor> = None;
        for (index, layer) in self.layers.iter().enumerate() {
            let input = current.as_ref().unwrap_or(x);
            current = Some(match activation.op() {
                Some(op) if index + 1 < self.layers.len() => layer.infer_activated(input, op)?,
                _ => layer.infer(input)?,
            });
        }
        match current {
            Some(output) => Ok(output),
            None => x.try_clone(),
        }
    }

    /// The widths of the layers' inputs and the last output: `[inputs, hidden…, outputs]`.
    pub fn sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = self
            .layers
            .iter()
            .map(|layer| layer.weight.shape()[0])
            .collect();
        if let Some(last) = self.layers.last() {
            sizes.push(last.weight.shape()[1]);
        }
        sizes
    }

    pub fn parameters(&self) -> Vec<Arc<Tensor>> {
        self.layers.iter().flat_map(Linear::parameters).collect()
    }

    /// The parameters with the names checkpoints give them: `layers.0.weight` ([inputs, outputs]),
    /// `layers.0.bias`, and so on.
    pub fn named_parameters(&self) -> Vec<(String, Arc<Tensor>)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(index, layer)| {
                std::iter::once((format!("layers.{index}.weight"), Arc::clone(&layer.weight)))
                    .chain(
                        layer
                            .bias
                            .iter()
                            .map(move |bias| (format!("layers.{index}.bias"), Arc::clone(bias))),
                    )
            })
            .collect()
    }
}

// The inherent methods stay callable without importing the trait; the trait lets one training step take any model.
impl Module for Linear {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        Linear::forward(self, tape, x)
    }

    fn infer(&self, x: &Tensor) -> Result<Tensor> {
        Linear::infer(self, x)
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        Linear::parameters(self)
    }
}

impl Module for Mlp {
    fn forward(&self, tape: &GradientTape, x: &Tensor) -> Result<Tensor> {
        Mlp::forward(self, tape, x)
    }

    fn infer(&self, x: &Tensor) -> Result<Tensor> {
        Mlp::infer(self, x)
    }

    fn parameters(&self) -> Vec<Arc<Tensor>> {
        Mlp::parameters(self)
    }
}
