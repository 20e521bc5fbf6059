//! The runtime: what a session is while it is open. It owns the device, the pool's wgpu storage, the command
//! stream (recorded work submitted in batches, with a uniform ring for each dispatch's parameters), the
//! pipeline cache and the one read-back path. Kernels use it through a small API (allocate, release, dispatch,
//! write, read, limits) and never see its fields.

mod pipelines;
mod suspend;
mod tuner;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::pool::{Allocation, MemoryStats, Pool, PoolConfig, SlabError, SlabId, SlabStorage};

pub(crate) use pipelines::{wgsl_constants, Kernel, PipelineCache, Shader, WORKGROUP_SIZE};
pub(crate) use suspend::{ResumeFigures, SuspendFigures, Suspension};
pub(crate) use tuner::{adapter_key, cache_file, size_bucket, Tuner};
pub use tuner::{
    tuning_cache_dir, tuning_cache_file, PickSource, Tuning, TuningRecord, VariantTime,
    CACHE_DIR_ENV, TUNING_ENV,
};

/// How long a wait for the GPU blocks before it asks the interrupt check again.
const WAIT_SLICE: std::time::Duration = std::time::Duration::from_millis(50);

/// What [`set_interrupt_check`] installed.
type InterruptCheck = Box<dyn Fn() -> bool + Send + Sync>;

static INTERRUPT_CHECK: std::sync::OnceLock<InterruptCheck> = std::sync::OnceLock::new();

/// Installs, once for the process, a check that a wait for the GPU (a read-back, a flush that must finish) asks
/// every 50 ms: when it returns true the wait gives up with [`Error::WaitInterrupted`], the work already
/// submitted finishing in the background. A front end passes its signal check (Python's, so that Ctrl-C is
/// answered during one long operation). Returns false where a check was installed already.
pub fn set_interrupt_check(check: impl Fn() -> bool + Send + Sync + 'static) -> bool {
    INTERRUPT_CHECK.set(Box::new(check)).is_ok()
}

fn interrupt_requested() -> bool {
    INTERRUPT_CHECK.get().is_some_and(|check| check())
}

/// Matmul kernel families. GPUs reward staging tiles in workgroup memory; llvmpipe (a CPU adapter) pays more
/// for the barriers than the staging saves, and runs register-tiled kernels best.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MatmulKernel {
    /// Register tiles on CPU adapters, shared-memory tiles on GPUs by default; the tuner may pick either
    /// family's variants.
    #[default]
    Auto,
    /// Register-tiled kernels (vec4 where shapes allow).
    Registers,
    /// Shared-memory tiled kernel for every shape.
    SharedTiles,
}

/// How float32 products may be computed, in PyTorch's `set_float32_matmul_precision` names: `Highest` (the
/// default) is exact float32 arithmetic; `High` allows products that keep about float32's accuracy by splitting
/// each operand into a pair of float16 values on tensor cores (Ootomo & Yokota, arXiv 2203.03341); `Medium`
/// allows operands rounded to float16 with float32 accumulation (a relative error of about 2⁻¹¹ per operand).
/// A request is an upper bound on the error, never a promise of speed: where the session has no faster kernel
/// for it, products run at `Highest`, and [`crate::Session::info`] says which is in effect and why.
///
/// ```
/// use wgcompute::MatmulPrecision;
/// assert_eq!("medium".parse::<MatmulPrecision>(), Ok(MatmulPrecision::Medium));
/// assert_eq!(MatmulPrecision::default().to_string(), "highest");
/// assert!("low".parse::<MatmulPrecision>().is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum MatmulPrecision {
    #[default]
    Highest,
    High,
    Medium,
}

impl MatmulPrecision {
    /// Every setting, by its name.
    pub const NAMES: [(&'static str, MatmulPrecision); 3] = [
        ("highest", MatmulPrecision::Highest),
        ("high", MatmulPrecision::High),
        ("medium", MatmulPrecision::Medium),
    ];

    pub fn name(self) -> &'static str {
        match self {
            MatmulPrecision::Highest => "highest",
            MatmulPrecision::High => "high",
            MatmulPrecision::Medium => "medium",
        }
    }
}

impl std::fmt::Display for MatmulPrecision {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl std::str::FromStr for MatmulPrecision {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        Self::NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text.trim()))
            .map(|&(_, precision)| precision)
            .ok_or_else(|| "expected \"highest\", \"high\" or \"medium\"".to_string())
    }
}

/// What a session's work has cost so far, counted as it is recorded: dispatches, queue submissions, bind
/// groups and pipelines created. Exact and clock-free, so a test can bound what a step costs; the counts are
/// the session's (they go on across suspend and resume) and reading them neither flushes nor waits.
///
/// ```
/// use wgcompute::{Session, SessionOptions, Tuning};
/// # fn main() -> wgcompute::Result<()> {
/// // The kernels' defaults: on first use the tuner would time variants, and its timing runs dispatch too.
/// let session = Session::open(SessionOptions::default().tuning(Tuning::Defaults))?;
/// let x = session.full(&[1000], 2.0)?;
/// let before = session.counters();
/// let _y = x.exp()?;
/// assert_eq!(session.counters().since(before).dispatches, 1);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Counters {
    /// Compute dispatches recorded (the tuner's timing runs included); copies and clears are not dispatches.
    pub dispatches: u64,
    /// Command buffers handed to the queue: batches, read-backs and the empty submissions that push queue
    /// writes. A suspend's and a resume's own transfers are not counted.
    pub submissions: u64,
    /// Bind groups created (the cache's misses).
    pub bind_groups: u64,
    /// Compute pipelines created (once per kernel variant, and per op code for the kernels specialised on
    /// one, per device the session has been on).
    pub pipelines: u64,
}

impl Counters {
    /// What was counted after `earlier`, a reading of the same session.
    pub fn since(self, earlier: Counters) -> Counters {
        Counters {
            dispatches: self.dispatches.saturating_sub(earlier.dispatches),
            submissions: self.submissions.saturating_sub(earlier.submissions),
            bind_groups: self.bind_groups.saturating_sub(earlier.bind_groups),
            pipelines: self.pipelines.saturating_sub(earlier.pipelines),
        }
    }
}

/// The counts behind [`Counters`], shared by the session's lock-holder and whichever runtime it has open, so a
/// reading takes no lock and a resumed runtime counts on from where the suspended one stopped.
#[derive(Default)]
pub(crate) struct CounterCells {
    dispatches: AtomicU64,
    submissions: AtomicU64,
    bind_groups: AtomicU64,
    pipelines: AtomicU64,
}

impl CounterCells {
    fn read(&self) -> Counters {
        Counters {
            dispatches: self.dispatches.load(Ordering::Relaxed),
            submissions: self.submissions.load(Ordering::Relaxed),
            bind_groups: self.bind_groups.load(Ordering::Relaxed),
            pipelines: self.pipelines.load(Ordering::Relaxed),
        }
    }

    fn count(cell: &AtomicU64) {
        // Only the runtime behind the session's lock writes: relaxed increments are exact.
        cell.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dispatch(&self) {
        Self::count(&self.dispatches);
    }

    pub(crate) fn bind_group(&self) {
        Self::count(&self.bind_groups);
    }

    pub(crate) fn pipeline(&self) {
        Self::count(&self.pipelines);
    }

    fn submission(&self) {
        Self::count(&self.submissions);
    }
}

/// The pool's storage: wgpu buffers, created inside error scopes so a driver out-of-memory is an error, not a
/// panic.
pub(crate) struct WgpuSlabs {
    device: wgpu::Device,
}

const SLAB_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl SlabStorage for WgpuSlabs {
    type Buffer = wgpu::Buffer;

    fn create(&mut self, bytes: u64) -> Result<wgpu::Buffer, SlabError> {
        let (buffer, refusal) = within_error_scopes(&self.device, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgcompute slab"),
                size: bytes,
                usage: SLAB_USAGE,
                mapped_at_creation: false,
            })
        });
        match refusal {
            None => Ok(buffer),
            Some(refusal) => {
                buffer.destroy();
                Err(match refusal {
                    Refusal::OutOfMemory => SlabError::OutOfMemory,
                    Refusal::Invalid(error) => SlabError::Other(Error::driver_caused(
                        "create slab",
                        error.to_string(),
                        error,
                    )),
                })
            }
        }
    }

    fn destroy(&mut self, buffer: wgpu::Buffer) {
        buffer.destroy();
    }
}

/// What the driver refused inside error scopes.
pub(crate) enum Refusal {
    OutOfMemory,
    Invalid(wgpu::Error),
}

/// Runs `work` inside out-of-memory and validation error scopes, so that what the driver refuses comes back
/// here instead of being raised as an alarm that a later, unrelated call would report.
pub(crate) fn within_error_scopes<T>(
    device: &wgpu::Device,
    work: impl FnOnce() -> T,
) -> (T, Option<Refusal>) {
    let out_of_memory = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let value = work();
    let invalid = pollster::block_on(validation.pop());
    let full = pollster::block_on(out_of_memory.pop());
    let refusal = match (full, invalid) {
        (Some(_), _) => Some(Refusal::OutOfMemory),
        (None, Some(error)) => Some(Refusal::Invalid(error)),
        (None, None) => None,
    };
    (value, refusal)
}

/// A byte range of a slab, as kernels bind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BufferRange {
    pub slab: SlabId,
    pub offset: u64,
    pub bytes: u64,
}

impl BufferRange {
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &BufferRange) -> bool {
        self.slab == other.slab
            && self.offset < other.offset + other.bytes
            && other.offset < self.offset + self.bytes
    }

    /// The part holding 4-byte elements `first..first + count`.
    pub fn elements(&self, first: u64, count: u64) -> BufferRange {
        BufferRange {
            slab: self.slab,
            offset: self.offset + first * 4,
            bytes: count * 4,
        }
    }
}

/// Uniform parameters of one dispatch live in one slot of a ring, bound with a dynamic offset.
pub(crate) const PARAM_SLOT_BYTES: u64 = 256;
/// Slots per batch; a full ring submits the batch. 64 KiB is the smallest max uniform binding in WebGPU.
const PARAM_SLOTS: u64 = 256;
/// Dispatches per batch before it is submitted even if nothing waits on it, so the GPU is never starved.
const MAX_RECORDED_PER_BATCH: u32 = 192;

/// Commands recorded but not yet submitted, with what must wait for their submission.
struct Batch {
    /// The open compute pass, shared by consecutive dispatches: each pass costs on its own (lavapipe: about
    /// 16 µs of the 40 an empty dispatch takes in a batch, by the `empty_dispatch` rows), and wgpu orders the
    /// dispatches within one pass as it does across passes. Ended before the encoder records anything else.
    pass: Option<wgpu::ComputePass<'static>>,
    encoder: Option<wgpu::CommandEncoder>,
    params: Vec<u8>,
    params_buffer: wgpu::Buffer,
    recorded: u32,
    /// Ranges freed while this batch was recorded, which its commands may still read or write. A freed range
    /// goes back to the pool at once (the stream orders later dispatches after earlier ones, as a CUDA stream
    /// does for PyTorch's caching allocator); only a queue write, which runs before the batch's commands, must
    /// not land in one of these, so a write there is recorded in order instead (`write_fresh`).
    freed_in_batch: Vec<BufferRange>,
    /// Queue writes not yet submitted: a wait submits them first, so that it covers them too.
    writes_pending: bool,
}

/// The open state of a session, on a GPU or a CPU adapter alike: the device and everything made on it. Kernels
/// reach the device only through its methods.
pub(crate) struct Runtime {
    device: wgpu::Device,
    queue: wgpu::Queue,
    pool: Pool<WgpuSlabs>,
    pipelines: PipelineCache,
    limits: wgpu::Limits,
    poison_outputs: bool,
    matmul_kernel: MatmulKernel,
    /// Build every module with wgpu's runtime checks, those with proven bounds too.
    checked_kernels: bool,
    reserve_up_front: bool,
    tuner: Tuner,
    batch: Batch,
    alarms: Arc<Alarms>,
    counters: Arc<CounterCells>,
    adapter: wgpu::Adapter,
    instance: wgpu::Instance,
}

/// A device just opened, with everything it needs kept alive and the alarms its callbacks raise.
///
/// The fields are declared in the order a release drops them (see `release_all`): dropping one whole releases
/// it in that order.
pub(crate) struct OpenedDevice {
    pub queue: wgpu::Queue,
    pub device: wgpu::Device,
    pub adapter: wgpu::Adapter,
    pub instance: wgpu::Instance,
    pub alarms: Arc<Alarms>,
}

/// What a runtime is opened with, besides the device itself.
pub(crate) struct RuntimeSettings {
    pub limits: wgpu::Limits,
    pub pool: PoolConfig,
    pub reserve_up_front: bool,
    pub poison_outputs: bool,
    /// `Auto`: by adapter type by default, and the tuner may try the other family.
    pub matmul_kernel: MatmulKernel,
    pub checked_kernels: bool,
    /// Chooses kernel variants; per runtime, so a runtime on another adapter chooses afresh.
    pub tuner: Tuner,
}

impl Runtime {
    /// Takes ownership of an opened device and sets up its pool and parameter ring.
    pub fn new(opened: OpenedDevice, settings: RuntimeSettings) -> Result<Runtime> {
        let pool = Pool::new(
            WgpuSlabs {
                device: opened.device.clone(),
            },
            settings.pool,
        );
        let mut runtime = Self::around(opened, settings, pool);
        if runtime.reserve_up_front {
            runtime.pool.reserve_up_to_limit()?;
        }
        Ok(runtime)
    }

    fn around(opened: OpenedDevice, settings: RuntimeSettings, pool: Pool<WgpuSlabs>) -> Runtime {
        let OpenedDevice {
            instance,
            adapter,
            device,
            queue,
            alarms,
        } = opened;
        let params_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgcompute parameters"),
            size: PARAM_SLOTS * PARAM_SLOT_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Runtime {
            pipelines: PipelineCache::default(),
            batch: Batch {
                pass: None,
                encoder: None,
                params: Vec::new(),
                params_buffer,
                recorded: 0,
                freed_in_batch: Vec::new(),
                writes_pending: false,
            },
            pool,
            limits: settings.limits,
            poison_outputs: settings.poison_outputs,
            matmul_kernel: settings.matmul_kernel,
            checked_kernels: settings.checked_kernels,
            reserve_up_front: settings.reserve_up_front,
            alarms,
            counters: Arc::default(),
            tuner: settings.tuner,
            device,
            queue,
            adapter,
            instance,
        }
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Whether new op outputs are NaN-filled before their op runs (tests).
    pub fn poison_outputs(&self) -> bool {
        self.poison_outputs
    }

    pub fn matmul_kernel(&self) -> MatmulKernel {
        self.matmul_kernel
    }

    pub fn adapter(&self) -> &wgpu::Adapter {
        &self.adapter
    }

    pub fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    pub fn check_request(&self, bytes: u64) -> Result<()> {
        self.pool.check_request(bytes).map(|_| ())
    }

    pub fn reset_peak(&mut self) {
        self.pool.reset_peak();
    }

    pub(crate) fn counters(&self) -> &CounterCells {
        &self.counters
    }

    /// Hands command buffers to the queue, counting the submission.
    fn submit(&self, buffers: impl IntoIterator<Item = wgpu::CommandBuffer>) {
        self.counters.submission();
        self.queue.submit(buffers);
    }

    /// Changes the pool's cap; see `Pool::set_limit`.
    pub fn set_limit(&mut self, limit: Option<u64>) -> Result<()> {
        self.sync()?;
        let outcome = self.pool.set_limit(limit);
        self.forget_released();
        outcome
    }

    /// The size of a slab's buffer, if it exists: for kernels that bind whole slabs (the optimizer's table pass).
    pub fn slab_bytes(&self, slab: SlabId) -> Option<u64> {
        self.pool.slab_bytes(slab)
    }

    /// Waits for the device, then destroys empty slabs.
    pub fn trim(&mut self) -> Result<()> {
        self.sync()?;
        self.pool.trim();
        self.forget_released();
        Ok(())
    }

    /// Destroys the device as a driver reset would, and raises the alarm a driver would.
    pub fn simulate_device_loss(&self) {
        self.device.destroy();
        self.alarms.device_lost("simulated device loss".to_string());
    }

    pub fn is_lost(&self) -> bool {
        self.alarms.is_lost()
    }

    /// The device and queue, for the duration of `work` only: for baselines measured against raw wgpu.
    pub fn with_raw_device<T>(&self, work: impl FnOnce(&wgpu::Device, &wgpu::Queue) -> T) -> T {
        work(&self.device, &self.queue)
    }

    /// Allocates from the pool. The pool may give empty buffers back to make room only while no recorded or
    /// queued work can still use them; when that is what the request needs, the batch is submitted first.
    pub fn allocate(&mut self, bytes: u64) -> Result<Allocation> {
        let may_release = self.batch.recorded == 0 && !self.batch.writes_pending;
        let outcome = match self.pool.allocate(bytes, may_release) {
            Err(Error::OutOfMemory { .. }) if !may_release && self.pool.has_empty_slabs() => {
                self.flush()?;
                self.pool.allocate(bytes, true)
            }
            other => other,
        };
        self.forget_released();
        outcome
    }

    /// Returns a range to the pool at once: later recorded work may reuse it, since the stream runs it after
    /// the work recorded before (see `Batch::freed_in_batch` for the one exception, queue writes).
    pub fn release(&mut self, allocation: Allocation) {
        if self.batch.recorded > 0 {
            self.batch.freed_in_batch.push(BufferRange {
                slab: allocation.slab,
                offset: allocation.offset,
                bytes: allocation.bytes,
            });
        }
        self.pool.free(allocation);
    }

    /// Lets the bind-group cache forget the slabs the pool has destroyed.
    fn forget_released(&mut self) {
        let gone = self.pool.take_released();
        if !gone.is_empty() {
            self.pipelines.forget_slabs(&gone);
        }
    }

    fn buffer(&self, slab: SlabId) -> Result<&wgpu::Buffer> {
        self.pool
            .buffer(slab)
            .ok_or_else(|| Error::driver("bind", format!("slab {slab} no longer exists")))
    }

    /// The encoder of the open batch (its compute pass ended), and a fresh parameter slot holding `params`:
    /// (encoder, dynamic offset).
    fn record(&mut self, params: &[u8]) -> Result<(&mut wgpu::CommandEncoder, u32)> {
        let offset = self.record_slot(params)?;
        self.batch.pass = None;
        Ok((self.open_encoder(), offset))
    }

    /// The open batch's compute pass, begun on its encoder if none is open, and a fresh parameter slot holding
    /// `params`: (pass, dynamic offset).
    fn record_in_pass(&mut self, params: &[u8]) -> Result<(&mut wgpu::ComputePass<'static>, u32)> {
        let offset = self.record_slot(params)?;
        if self.batch.pass.is_none() {
            let pass = self
                .open_encoder()
                .begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("wgcompute batch"),
                    timestamp_writes: None,
                })
                .forget_lifetime();
            self.batch.pass = Some(pass);
        }
        match self.batch.pass.as_mut() {
            Some(pass) => Ok((pass, offset)),
            None => Err(Error::driver("record", "no compute pass open")),
        }
    }

    fn open_encoder(&mut self) -> &mut wgpu::CommandEncoder {
        let device = &self.device;
        self.batch.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgcompute batch"),
            })
        })
    }

    /// Counts one more command into the batch (submitting a full one first) and gives it a parameter slot
    /// holding `params`: its dynamic offset.
    fn record_slot(&mut self, params: &[u8]) -> Result<u32> {
        if self.batch.recorded >= MAX_RECORDED_PER_BATCH
            || self.batch.params.len() as u64 >= PARAM_SLOTS * PARAM_SLOT_BYTES
        {
            self.flush()?;
        }
        if params.len() as u64 > PARAM_SLOT_BYTES {
            return Err(Error::driver(
                "record",
                format!("{} bytes of parameters exceed one slot", params.len()),
            ));
        }
        let offset = self.batch.params.len() as u32;
        self.batch.params.extend_from_slice(params);
        self.batch
            .params
            .resize((offset as u64 + PARAM_SLOT_BYTES) as usize, 0);
        self.batch.recorded += 1;
        Ok(offset)
    }

    fn params_buffer(&self) -> &wgpu::Buffer {
        &self.batch.params_buffer
    }

    /// Submits the open batch, then gives back the buffers that stayed empty through it.
    pub fn flush(&mut self) -> Result<()> {
        // A pass ends when dropped; the encoder can finish only after.
        self.batch.pass = None;
        if let Some(encoder) = self.batch.encoder.take() {
            if !self.batch.params.is_empty() {
                self.queue
                    .write_buffer(&self.batch.params_buffer, 0, &self.batch.params);
            }
            self.submit([encoder.finish()]);
        } else if self.batch.writes_pending {
            // wgpu hands queue writes to the device with the next submission, even an empty one.
            self.submit([]);
        }
        self.batch.writes_pending = false;
        self.batch.params.clear();
        self.batch.recorded = 0;
        self.batch.freed_in_batch.clear();
        self.pool.retire_idle();
        self.forget_released();
        Ok(())
    }

    /// Submits and waits until the device has finished everything.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.wait(false)
    }

    /// Waits for the submitted work; an `interruptible` wait (a read-back, where a caller blocks on its result)
    /// goes in slices of [`WAIT_SLICE`], asking the interrupt check (see [`set_interrupt_check`]) between them
    /// whether to give up. The tuner's timing runs and a close wait whole: an interruption there would be taken
    /// for a failed candidate, or leave buffers in use.
    fn wait(&self, interruptible: bool) -> Result<()> {
        if !interruptible {
            return self
                .device
                .poll(wgpu::PollType::wait_indefinitely())
                .map(|_| ())
                .map_err(|error| Error::DeviceLost {
                    reason: error.to_string(),
                    source: Some(Box::new(error)),
                });
        }
        loop {
            let slice = wgpu::PollType::Wait {
                submission_index: None,
                timeout: Some(WAIT_SLICE),
            };
            match self.device.poll(slice) {
                Ok(_) => return Ok(()),
                Err(wgpu::PollError::Timeout) => {
                    if interrupt_requested() {
                        return Err(Error::WaitInterrupted);
                    }
                }
                Err(error) => {
                    return Err(Error::DeviceLost {
                        reason: error.to_string(),
                        source: Some(Box::new(error)),
                    })
                }
            }
        }
    }

    /// Writes bytes into a range that recorded commands may read: they are submitted first, since the queue runs
    /// writes before the next submission's commands.
    pub fn write(&mut self, range: BufferRange, bytes: &[u8]) -> Result<()> {
        if self.batch.recorded > 0 {
            self.flush()?;
        }
        self.write_fresh(range, bytes)
    }

    /// Writes bytes into a range just allocated, which no command recorded after its allocation uses yet: no
    /// flush needed. Where the range was freed by another tensor during this batch, whose recorded commands may
    /// still use those bytes, the write is recorded in order behind them; elsewhere the queue writes it.
    pub fn write_fresh(&mut self, range: BufferRange, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let written = BufferRange {
            bytes: bytes.len() as u64,
            ..range
        };
        let overtakes_recorded_work = self
            .batch
            .freed_in_batch
            .iter()
            .any(|freed| freed.overlaps(&written));
        if overtakes_recorded_work {
            return self.write_in_order(range, bytes);
        }
        let buffer = self.buffer(range.slab)?;
        self.queue.write_buffer(buffer, range.offset, bytes);
        self.batch.writes_pending = true;
        Ok(())
    }

    /// Records a copy of `bytes` into `range` from a staging buffer of their own, so that it lands after every
    /// command recorded before it (a queue write would land before them all).
    fn write_in_order(&mut self, range: BufferRange, bytes: &[u8]) -> Result<()> {
        let size = (bytes.len() as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgcompute ordered upload"),
            size,
            usage: wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: true,
        });
        {
            let mut view = staging
                .slice(..)
                .get_mapped_range_mut()
                .map_err(|error| Error::driver_caused("upload", error.to_string(), error))?;
            view.slice(..bytes.len()).copy_from_slice(bytes);
        }
        staging.unmap();
        let target = self.buffer(range.slab)?.clone();
        let (encoder, _) = self.record(&[])?;
        encoder.copy_buffer_to_buffer(&staging, 0, &target, range.offset, size);
        Ok(())
    }

    /// Copies bytes between ranges of different slabs through the command stream (the copy engine cannot copy
    /// within one buffer).
    pub fn copy(&mut self, from: BufferRange, to: BufferRange) -> Result<()> {
        if from.bytes == 0 {
            return Ok(());
        }
        let source = self.buffer(from.slab)?.clone();
        let target = self.buffer(to.slab)?.clone();
        let (encoder, _) = self.record(&[])?;
        encoder.copy_buffer_to_buffer(&source, from.offset, &target, to.offset, from.bytes);
        Ok(())
    }

    /// Fills a range with zeros through the command stream (ordered with the recorded commands).
    pub fn clear(&mut self, range: BufferRange) -> Result<()> {
        if range.bytes == 0 {
            return Ok(());
        }
        let buffer = self.buffer(range.slab)?.clone();
        let (encoder, _) = self.record(&[])?;
        encoder.clear_buffer(&buffer, range.offset, Some(range.bytes));
        Ok(())
    }

    /// The one read-back path: copies a range to a mappable buffer, waits, and returns its bytes.
    pub fn read(&mut self, range: BufferRange) -> Result<Vec<u8>> {
        if range.bytes == 0 {
            return Ok(Vec::new());
        }
        self.flush()?;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgcompute read-back"),
            size: range.bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let result = self.read_through(range, &staging);
        staging.destroy();
        result
    }

    fn read_through(&mut self, range: BufferRange, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        let source = self.buffer(range.slab)?;
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgcompute read-back"),
            });
        encoder.copy_buffer_to_buffer(source, range.offset, staging, 0, range.bytes);
        self.submit([encoder.finish()]);
        self.map_and_read(staging, <[u8]>::to_vec)
    }

    /// Maps a read-back buffer whose copies are submitted, waits, and hands its bytes to `read`.
    fn map_and_read<T>(&self, staging: &wgpu::Buffer, read: impl FnOnce(&[u8]) -> T) -> Result<T> {
        let (sender, receiver) = std::sync::mpsc::channel();
        let slice = staging.slice(..);
        slice.map_async(wgpu::MapMode::Read, move |outcome| {
            // The receiver waits below; if it is gone there is no one to tell.
            let _ = sender.send(outcome);
        });
        self.wait(true)?;
        match receiver.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                return Err(Error::driver_caused(
                    "read-back",
                    format!("mapping the read-back buffer failed: {error}"),
                    error,
                ))
            }
            Err(_) => return Err(Error::device_lost("the read-back never completed")),
        }
        let outcome = {
            let view = slice
                .get_mapped_range()
                .map_err(|error| Error::driver_caused("read-back", error.to_string(), error))?;
            read(&view)
        };
        staging.unmap();
        Ok(outcome)
    }
}

/// What the driver tells a session from outside any call: device loss, and errors raised outside an error
/// scope (wgpu's default handler would panic on them). One atomic flag keeps the common path to a single load.
#[derive(Default)]
pub(crate) struct Alarms {
    raised: AtomicBool,
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Vec<String>>,
}

impl Alarms {
    pub fn device_lost(&self, reason: String) {
        let mut lost = lock(&self.lost);
        if lost.is_none() {
            *lost = Some(reason);
        }
        self.raised.store(true, Ordering::Release);
    }

    pub fn uncaptured(&self, message: String) {
        lock(&self.uncaptured).push(message);
        self.raised.store(true, Ordering::Release);
    }

    pub fn is_lost(&self) -> bool {
        self.raised.load(Ordering::Acquire) && lock(&self.lost).is_some()
    }

    /// The error to report instead of a result, if the driver raised one.
    pub fn check(&self) -> Result<()> {
        if !self.raised.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(reason) = lock(&self.lost).clone() {
            return Err(Error::device_lost(reason));
        }
        let mut uncaptured = lock(&self.uncaptured);
        let message = uncaptured.pop();
        if uncaptured.is_empty() {
            self.raised.store(false, Ordering::Release);
        }
        match message {
            Some(message) => Err(Error::driver("device", message)),
            None => Ok(()),
        }
    }
}

/// Where a session stands: open on a device, suspended with its tensors on the host, or closed.
enum State {
    Open(Box<Runtime>),
    Suspended(Suspension),
    Closed,
}

/// A session's state behind its lock: held strongly by the session alone and weakly by each of its tensors.
pub(crate) struct SharedRuntime {
    state: Mutex<State>,
    id: u64,
    /// The same cells as the open runtime's, kept here so they outlive a suspension.
    counters: Arc<CounterCells>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; the state is still usable for release.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SharedRuntime {
    pub fn new(runtime: Runtime, id: u64) -> Self {
        let counters = runtime.counters.clone();
        Self {
            state: Mutex::new(State::Open(Box::new(runtime))),
            id,
            counters,
        }
    }

    /// The session's counts so far; takes no lock, so it neither waits on nor disturbs recorded work.
    pub fn counters(&self) -> Counters {
        self.counters.read()
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Reads the runtime (if open) without the alarm checks: for figures that must work on a lost device too.
    pub fn peek<T>(&self, read: impl FnOnce(Option<&Runtime>) -> T) -> T {
        match &*lock(&self.state) {
            State::Open(runtime) => read(Some(runtime)),
            _ => read(None),
        }
    }

    pub fn is_suspended(&self) -> bool {
        matches!(&*lock(&self.state), State::Suspended(_))
    }

    /// Closes the session for every tensor, handing back the runtime if it was open. A suspended session's host
    /// copies go with it.
    pub fn take(&self) -> Option<Runtime> {
        match std::mem::replace(&mut *lock(&self.state), State::Closed) {
            State::Open(runtime) => Some(*runtime),
            State::Suspended(_) | State::Closed => None,
        }
    }

    /// Runs `work` on the open device, or says why it cannot: suspended, closed, or lost.
    pub fn with_runtime<T>(&self, work: impl FnOnce(&mut Runtime) -> Result<T>) -> Result<T> {
        self.with_runtime_or_undo(work, |_, _| {})
    }

    /// As `with_runtime`, handing a successful result to `undo` (under the same lock) when the driver reports an
    /// error after all, so that what the work took (a pool range) is not lost with the result.
    pub fn with_runtime_or_undo<T>(
        &self,
        work: impl FnOnce(&mut Runtime) -> Result<T>,
        undo: impl FnOnce(&mut Runtime, T),
    ) -> Result<T> {
        let mut guard = lock(&self.state);
        let runtime = match &mut *guard {
            State::Open(runtime) => runtime,
            State::Suspended(_) => return Err(Error::Suspended),
            State::Closed => return Err(Error::SessionClosed),
        };
        if runtime.alarms.is_lost() {
            runtime.alarms.check()?;
        }
        let outcome = work(runtime)?;
        if let Err(alarm) = runtime.alarms.check() {
            undo(runtime, outcome);
            return Err(alarm);
        }
        Ok(outcome)
    }

    /// Gives a tensor's range back; while suspended only the layout forgets it; a no-op once closed.
    pub fn release(&self, allocation: Allocation) {
        match &mut *lock(&self.state) {
            State::Open(runtime) => runtime.release(allocation),
            State::Suspended(suspension) => suspension.release(allocation),
            State::Closed => {}
        }
    }

    /// Copies every live range to the host and releases the device. On failure the session stays open (or
    /// lost) and nothing is released.
    pub fn suspend(&self) -> Result<SuspendFigures> {
        let mut guard = lock(&self.state);
        match std::mem::replace(&mut *guard, State::Closed) {
            State::Open(runtime) => match (*runtime).suspend() {
                Ok((suspension, figures)) => {
                    *guard = State::Suspended(suspension);
                    Ok(figures)
                }
                Err((runtime, error)) => {
                    *guard = State::Open(runtime);
                    Err(error)
                }
            },
            State::Suspended(suspension) => {
                *guard = State::Suspended(suspension);
                Err(Error::Suspended)
            }
            State::Closed => Err(Error::SessionClosed),
        }
    }

    /// Brings a suspended session back on `device`. On failure the device is released and the session stays
    /// suspended with every host copy kept.
    pub fn resume(&self, device: OpenedDevice, settings: RuntimeSettings) -> Result<ResumeFigures> {
        let mut guard = lock(&self.state);
        match std::mem::replace(&mut *guard, State::Closed) {
            State::Suspended(suspension) => {
                let tensors = suspension.layout.allocations();
                match Runtime::restore(device, settings, suspension) {
                    Ok((mut runtime, bytes_uploaded)) => {
                        // The session counts on where it stopped; the restore's own uploads are not its work.
                        runtime.counters = self.counters.clone();
                        *guard = State::Open(Box::new(runtime));
                        Ok(ResumeFigures {
                            bytes_uploaded,
                            tensors,
                        })
                    }
                    Err((error, suspension)) => {
                        *guard = State::Suspended(suspension);
                        Err(error)
                    }
                }
            }
            State::Open(runtime) => {
                *guard = State::Open(runtime);
                suspend::release_opened(device);
                Err(Error::NotSuspended)
            }
            State::Closed => {
                suspend::release_opened(device);
                Err(Error::SessionClosed)
            }
        }
    }

    /// Whether the open device has been lost.
    pub fn is_lost(&self) -> bool {
        self.peek(|runtime| runtime.is_some_and(Runtime::is_lost))
    }
}

/// The release order, spelled out: finish work, destroy buffers, destroy the device, let wgpu reclaim, drop.
impl Runtime {
    /// Gives everything back, in the order `release_all` spells out.
    pub fn shut_down(self, device_lost: bool) {
        release_all(self, device_lost);
    }
}

fn release_all(mut runtime: Runtime, device_lost: bool) {
    if !device_lost && runtime.sync().is_err() {
        // A device lost while closing still has its buffers destroyed below.
    }
    runtime.batch.pass = None;
    runtime.batch.encoder = None;
    runtime.batch.freed_in_batch.clear();
    runtime.pool.destroy_all();
    runtime.batch.params_buffer.destroy();
    runtime.pipelines.clear();
    runtime.device.destroy();
    // wgpu frees destroyed resources when the device is polled; a lost device may refuse, which is fine.
    let _ = runtime.device.poll(wgpu::PollType::wait_indefinitely());
    let Runtime {
        device,
        queue,
        pool,
        pipelines,
        batch,
        adapter,
        instance,
        ..
    } = runtime;
    drop(pipelines);
    drop(batch);
    drop(pool);
    drop(queue);
    drop(device);
    drop(adapter);
    drop(instance);
}
