//! wgcompute: GPU compute on wgpu whose sessions give every byte back.
//!
//! A [`Session`] owns a device and a memory pool on it. Tensors are carved from the pool and refer to their
//! session weakly, so closing or dropping the session returns all of its GPU memory to the driver (buffers,
//! device and instance) while the process goes on. Several sessions, each with its own memory cap, can be open
//! at once.
//!
//! ```
//! use wgcompute::{MemoryLimit, Session, SessionOptions};
//! # fn main() -> wgcompute::Result<()> {
//! let session = Session::open(SessionOptions::default().memory_limit(MemoryLimit::Bytes(256 << 20)))?;
//! let ones = session.full(&[1024, 1024], 1.0)?;
//! ones.scale_add_(3.0, 0.5)?;
//! assert_eq!(ones.read_range(0..2)?, vec![3.5, 3.5]);
//! println!("{:?}", session.memory_stats()?);
//! session.close();
//! # Ok(()) }
//! ```

pub mod autograd;
#[cfg(feature = "bench")]
pub mod bench;
pub mod checkpoint;
pub mod data;
pub mod device;
mod dtype;
mod error;
mod files;
pub mod fit;
mod kernels;
pub mod losses;
pub mod nn;
mod op;
mod ops;
pub mod optim;
pub mod outputs;
pub mod pool;
mod runtime;
mod session;
pub mod shape;
mod tensor;
pub mod train;

pub use autograd::{GradientTape, Gradients};
pub use device::{list_adapters, AdapterDescription, AdapterSelector, DeviceMemory, MemorySource};
pub use dtype::Kind as DTypeKind;
pub use error::{ByteSize, Error, ErrorKind, Result};
pub use files::kind_of as file_kind;
pub use kernels::kernel_variants;
pub use losses::{Loss, LossReduction};
pub use nn::{ActivatedMlp, Activation, Linear, Mlp, Module, Sequential};
pub use op::elementwise::{BinaryOp, UnaryOp};
pub use op::index::{HostArray, IndexItem, Slice};
pub use op::logic::{LogicBinaryOp, LogicUnaryOp, TruthReduction};
pub use op::matmul::Transpose;
pub use op::reduce::ReduceOp;
pub use op::sort::Side;
pub use op::window::{Conv1dOptions, Conv2dOptions, Padding, Padding1d};
pub use ops::manipulate::{PadMode, Repeats, Split};
pub use ops::neural::{BatchNormOptions, BatchNormOutput};
pub use ops::optim::{AdamConfig, AdamHyperparameter, EpsilonPlacement, SgdConfig};
pub use optim::{
    Adam, GradientClipping, Optimizer, OptimizerKind, OptimizerRule, OptimizerState, RuleIndex,
    RuleOptimizer, RuleRow, Sgd,
};
pub use pool::MemoryStats;
pub use runtime::set_interrupt_check;
pub use runtime::Counters;
pub use runtime::{
    tuning_cache_dir, tuning_cache_file, MatmulKernel, MatmulPrecision, PickSource, Tuning,
    TuningRecord, VariantTime, CACHE_DIR_ENV, TUNING_ENV,
};
pub use session::{
    AdapterSummary, Capabilities, CloseReport, MemoryLimit, ResumeReport, Session, SessionInfo,
    SessionOptions, SuspendReport,
};
pub use tensor::{DType, Tensor, MAX_RANK};
/// The wgpu this crate is built on, for naming backends and device types.
pub use wgpu;

// The Rust blocks of the README and of the docs pages run as doctests (`cargo test --doc`), so a page that goes
// stale fails the build; python/tests/test_docs.py checks that every page with a Rust block is listed here.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/rust.md")]
pub struct RustPageDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/suspend.md")]
pub struct SuspendPageDoctests;
