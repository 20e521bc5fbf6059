//! Reverse-mode automatic differentiation: a tape records the forward pass over the engine's ops, and
//! `backward` walks it in reverse, freeing each intermediate as soon as no later step of the walk needs it.
//!
//! An op records itself when one of its operands is traced by a live [`GradientTape`] (see
//! `crate::tensor::record`), so that each op is written once, as a `Tensor` method; this module holds the tape,
//! the gradient rules and the reverse walk. Values on the tape share their data with the tensors handed out;
//! like every tensor, none of them keeps GPU memory alive past its session.
//!
//! ```
//! use std::sync::Arc;
//! use wgcompute::{GradientTape, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default())?;
//! let w = Arc::new(session.randn(&[4, 3], 1)?);
//! let x = session.rand(&[2, 4], 2)?;
//! let labels = session.rand(&[2, 3], 3)?;
//! let tape = GradientTape::new();
//! let logits = x.matmul(&tape.watch_parameter(&w)?)?;
//! let (losses, _) = logits.softmax_cross_entropy_with_logits(&labels)?;
//! let cost = losses.mean(None)?;
//! let gradients = tape.backward(&cost)?;
//! let dw = gradients.of(&w).expect("w took part");
//! assert_eq!(dw.shape(), &[4, 3]);
//! # Ok(()) }
//! ```

mod backward;
mod gradient_tape;
mod rules;
mod walk;

pub use backward::Gradients;
pub use gradient_tape::GradientTape;
