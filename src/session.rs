//! The session: opens a device, owns everything on it, batches its commands, and on close or drop gives every
//! byte back to the driver.
//!
//! A session holds the only strong reference to its state. Tensors hold a `Weak`, so nothing a user keeps can
//! keep a wgpu object alive; and because every wgpu object holds its device internally, closing does not rely on
//! drops alone: it destroys every buffer and then the device explicitly, and only then drops queue, device,
//! adapter and instance, in that order.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use crate::device::{self, AdapterSelector, DeviceMemory};
use crate::error::{Error, Result};
use crate::kernels::KernelCache;
use crate::pool::{Allocation, MemoryStats, Pool, PoolConfig, SlabError, SlabId, SlabStorage};
use crate::tensor::Tensor;

/// A cap on a session's GPU memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryLimit {
    Bytes(u64),
    /// A fraction (0, 1] of the device's memory; only where the adapter reports its size.
    Fraction(f64),
}

/// The smallest cap a bare integer may give: below this, a bare number is far more likely a mistyped fraction
/// or a forgotten unit than a real cap.
const MIN_BARE_BYTES: u64 = 1 << 20;

impl FromStr for MemoryLimit {
    type Err = Error;

    /// Parses a size with a unit (`2GiB`, `512MiB`, `1.5GB`), a bare integer byte count of at least 1 MiB
    /// (`1048576`), or a fraction of device memory in (0, 1] written with a decimal point (`0.5`, `1.0`).
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |why: &str| {
            Error::InvalidArgument {
            what: "memory limit",
            given: text.to_string(),
            expected: format!(
                "{why}; give a size with a unit (2GiB, 512MiB, 1.5GB), a byte count of at least 1048576 \
                 (1 MiB), or a fraction of device memory in (0, 1] with a decimal point (0.5, 1.0)"
            ),
        }
        };
        let trimmed = text.trim();
        let split = trimmed
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let value: f64 = number.parse().map_err(|_| invalid("not a number"))?;
        if !value.is_finite() || value <= 0.0 {
            return Err(invalid("the limit must be above zero"));
        }
        let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" if number.contains('.') => {
                return if value <= 1.0 {
                    Ok(Self::Fraction(value))
                } else {
                    Err(invalid(
                        "a bare number with a decimal point is a fraction, and this one is above 1",
                    ))
                };
            }
            "" => {
                let bytes: u64 = number.parse().map_err(|_| invalid("not a byte count"))?;
                return if bytes >= MIN_BARE_BYTES {
                    Ok(Self::Bytes(bytes))
                } else {
                    Err(invalid("a bare byte count below 1 MiB"))
                };
            }
            "b" => 1,
            "k" | "kb" => 1_000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            "t" | "tb" => 1_000_000_000_000,
            "tib" => 1 << 40,
            _ => return Err(invalid("an unknown unit")),
        };
        let bytes = (value * scale as f64).round();
        if bytes < 1.0 || bytes >= u64::MAX as f64 {
            return Err(invalid("the size is out of range"));
        }
        Ok(Self::Bytes(bytes as u64))
    }
}

impl MemoryLimit {
    /// The cap in bytes on a device of `total` bytes (if known), or why it cannot be honoured.
    fn resolve(self, total: Option<u64>) -> Result<u64> {
        match self {
            MemoryLimit::Bytes(0) => Err(Error::InvalidArgument {
                what: "memory limit",
                given: "0 bytes".to_string(),
                expected: "at least one byte; give no limit at all for an uncapped session"
                    .to_string(),
            }),
            MemoryLimit::Bytes(bytes) => Ok(bytes),
            MemoryLimit::Fraction(fraction) if !(fraction > 0.0 && fraction <= 1.0) => {
                Err(Error::InvalidArgument {
                    what: "memory fraction",
                    given: fraction.to_string(),
                    expected: "a fraction in (0, 1]".to_string(),
                })
            }
            MemoryLimit::Fraction(fraction) => match total {
                Some(total) => Ok((total as f64 * fraction) as u64),
                None => Err(Error::DeviceMemoryUnknown { fraction }),
            },
        }
    }
}

/// Matmul kernel families. GPUs reward staging tiles in workgroup memory; llvmpipe (a CPU adapter) pays more
/// for the barriers than the staging saves, and runs register-tiled kernels best.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MatmulKernel {
    /// Register tiles on CPU adapters, shared-memory tiles on GPUs.
    #[default]
    Auto,
    /// Register-tiled kernels (vec4 where shapes allow).
    Registers,
    /// Shared-memory tiled kernel for every shape.
    SharedTiles,
}

/// How to open a session.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    pub adapter: AdapterSelector,
    /// Cap on the bytes the session's pool may reserve. None: grow on demand without a cap.
    pub memory_limit: Option<MemoryLimit>,
    /// Reserve the whole cap when opening instead of growing on demand.
    pub reserve_up_front: bool,
    /// Which matmul kernels to use; `Auto` picks by adapter type.
    pub matmul_kernel: MatmulKernel,
    /// Fill every new op output with NaN before the op runs, so that an element a kernel fails to write shows
    /// up. For tests; it costs a fill per output.
    pub poison_outputs: bool,
}

impl SessionOptions {
    pub fn adapter(mut self, adapter: AdapterSelector) -> Self {
        self.adapter = adapter;
        self
    }

    pub fn memory_limit(mut self, limit: MemoryLimit) -> Self {
        self.memory_limit = Some(limit);
        self
    }

    pub fn matmul_kernel(mut self, kernel: MatmulKernel) -> Self {
        self.matmul_kernel = kernel;
        self
    }

    pub fn poison_outputs(mut self, poison: bool) -> Self {
        self.poison_outputs = poison;
        self
    }

    pub fn reserve_up_front(mut self, reserve: bool) -> Self {
        self.reserve_up_front = reserve;
        self
    }
}

/// What closing a session did, with the memory figures that show it.
#[derive(Clone, Debug, Serialize)]
pub struct CloseReport {
    pub memory_before_open: DeviceMemory,
    /// Taken at close, just before anything is released.
    pub memory_while_open: DeviceMemory,
    pub memory_after_close: DeviceMemory,
    /// The pool as it was just before it was released.
    pub pool: MemoryStats,
    /// Whether the device had been lost before the close.
    pub device_lost: bool,
}

/// The adapter a session runs on.
#[derive(Clone, Debug, Serialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: &'static str,
    pub device_type: &'static str,
    pub driver: String,
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
        let out_of_memory = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgcompute slab"),
            size: bytes,
            usage: SLAB_USAGE,
            mapped_at_creation: false,
        });
        let invalid = pollster::block_on(validation.pop());
        let full = pollster::block_on(out_of_memory.pop());
        if full.is_some() {
            buffer.destroy();
            return Err(SlabError::OutOfMemory);
        }
        if let Some(error) = invalid {
            buffer.destroy();
            return Err(SlabError::Other(Error::Driver {
                op: "create slab",
                message: error.to_string(),
            }));
        }
        Ok(buffer)
    }

    fn destroy(&mut self, buffer: wgpu::Buffer) {
        buffer.destroy();
    }
}

/// A byte range of a slab, as kernels bind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BufferRange {
    pub slab: SlabId,
    pub offset: u64,
    pub bytes: u64,
}

impl BufferRange {
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
    encoder: Option<wgpu::CommandEncoder>,
    params: Vec<u8>,
    params_buffer: wgpu::Buffer,
    recorded: u32,
    /// Ranges freed while recorded commands may still use them: returned to the pool only after submission, so
    /// an upload (which the queue runs before the next submission's commands) cannot overwrite them early.
    deferred_frees: Vec<Allocation>,
}

/// Everything that exists only while the session is open.
pub(crate) struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub pool: Pool<WgpuSlabs>,
    pub kernels: KernelCache,
    pub limits: wgpu::Limits,
    pub poison_outputs: bool,
    /// The matmul family this session uses, `Auto` resolved by adapter type.
    pub matmul_kernel: MatmulKernel,
    batch: Batch,
    adapter: wgpu::Adapter,
    instance: wgpu::Instance,
}

impl Gpu {
    /// Allocates from the pool; if the cap is hit while freed ranges wait on a submission, submits and retries.
    pub fn allocate(&mut self, bytes: u64) -> Result<Allocation> {
        match self.pool.allocate(bytes) {
            Err(Error::OutOfMemory { .. }) if !self.batch.deferred_frees.is_empty() => {
                self.flush()?;
                self.pool.allocate(bytes)
            }
            other => other,
        }
    }

    /// Returns a range to the pool, after the batch that may use it is submitted.
    pub fn release(&mut self, allocation: Allocation) {
        if self.batch.recorded == 0 {
            self.free_now(allocation);
        } else {
            self.batch.deferred_frees.push(allocation);
        }
    }

    fn free_now(&mut self, allocation: Allocation) {
        if let Some(gone) = self.pool.free(allocation) {
            self.kernels.forget_slabs(&[gone]);
        }
    }

    pub fn buffer(&self, slab: SlabId) -> Result<&wgpu::Buffer> {
        self.pool.buffer(slab).ok_or_else(|| Error::Driver {
            op: "bind",
            message: format!("slab {slab} no longer exists"),
        })
    }

    /// The encoder of the open batch, and a fresh parameter slot holding `params`: (encoder, dynamic offset).
    pub fn record(&mut self, params: &[u8]) -> Result<(&mut wgpu::CommandEncoder, u32)> {
        if self.batch.recorded >= MAX_RECORDED_PER_BATCH
            || self.batch.params.len() as u64 >= PARAM_SLOTS * PARAM_SLOT_BYTES
        {
            self.flush()?;
        }
        if params.len() as u64 > PARAM_SLOT_BYTES {
            return Err(Error::Driver {
                op: "record",
                message: format!("{} bytes of parameters exceed one slot", params.len()),
            });
        }
        let offset = self.batch.params.len() as u32;
        self.batch.params.extend_from_slice(params);
        self.batch
            .params
            .resize((offset as u64 + PARAM_SLOT_BYTES) as usize, 0);
        self.batch.recorded += 1;
        let device = &self.device;
        let encoder = self.batch.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgcompute batch"),
            })
        });
        Ok((encoder, offset))
    }

    pub fn params_buffer(&self) -> &wgpu::Buffer {
        &self.batch.params_buffer
    }

    /// Submits the open batch, then returns the ranges that waited on it.
    pub fn flush(&mut self) -> Result<()> {
        if let Some(encoder) = self.batch.encoder.take() {
            if !self.batch.params.is_empty() {
                self.queue
                    .write_buffer(&self.batch.params_buffer, 0, &self.batch.params);
            }
            self.queue.submit([encoder.finish()]);
        }
        self.batch.params.clear();
        self.batch.recorded = 0;
        for allocation in std::mem::take(&mut self.batch.deferred_frees) {
            self.free_now(allocation);
        }
        Ok(())
    }

    /// Submits and waits until the device has finished everything.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.wait()
    }

    fn wait(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map(|_| ())
            .map_err(|error| Error::DeviceLost {
                reason: error.to_string(),
            })
    }

    /// Writes bytes into a range. A range that recorded commands may read is written only after they are
    /// submitted, since the queue runs writes before the next submission's commands.
    pub fn write(&mut self, range: BufferRange, bytes: &[u8], fresh: bool) -> Result<()> {
        if !fresh && self.batch.recorded > 0 {
            self.flush()?;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let buffer = self.buffer(range.slab)?;
        self.queue.write_buffer(buffer, range.offset, bytes);
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
        self.queue.submit([encoder.finish()]);
        let (sender, receiver) = std::sync::mpsc::channel();
        let slice = staging.slice(..);
        slice.map_async(wgpu::MapMode::Read, move |outcome| {
            // The receiver waits below; if it is gone there is no one to tell.
            let _ = sender.send(outcome);
        });
        self.wait()?;
        match receiver.recv() {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                return Err(Error::Driver {
                    op: "read-back",
                    message: format!("mapping the read-back buffer failed: {error}"),
                })
            }
            Err(_) => {
                return Err(Error::DeviceLost {
                    reason: "the read-back never completed".to_string(),
                })
            }
        }
        let bytes = {
            let view = slice.get_mapped_range().map_err(|error| Error::Driver {
                op: "read-back",
                message: error.to_string(),
            })?;
            view.to_vec()
        };
        staging.unmap();
        Ok(bytes)
    }
}

/// What the driver tells a session from outside any call: device loss, and errors raised outside an error
/// scope (wgpu's default handler would panic on them). One atomic flag keeps the common path to a single load.
#[derive(Default)]
struct Alarms {
    raised: AtomicBool,
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Vec<String>>,
}

impl Alarms {
    fn device_lost(&self, reason: String) {
        let mut lost = lock(&self.lost);
        if lost.is_none() {
            *lost = Some(reason);
        }
        self.raised.store(true, Ordering::Release);
    }

    fn uncaptured(&self, message: String) {
        lock(&self.uncaptured).push(message);
        self.raised.store(true, Ordering::Release);
    }

    fn is_lost(&self) -> bool {
        self.raised.load(Ordering::Acquire) && lock(&self.lost).is_some()
    }

    /// The error to report instead of a result, if the driver raised one.
    fn check(&self) -> Result<()> {
        if !self.raised.load(Ordering::Acquire) {
            return Ok(());
        }
        if let Some(reason) = lock(&self.lost).clone() {
            return Err(Error::DeviceLost { reason });
        }
        let mut uncaptured = lock(&self.uncaptured);
        let message = uncaptured.pop();
        if uncaptured.is_empty() {
            self.raised.store(false, Ordering::Release);
        }
        match message {
            Some(message) => Err(Error::Driver {
                op: "device",
                message,
            }),
            None => Ok(()),
        }
    }
}

/// State shared, weakly, with every tensor of the session.
pub(crate) struct SessionInner {
    gpu: Mutex<Option<Gpu>>,
    alarms: Arc<Alarms>,
    id: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; the state is still usable for release.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SessionInner {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Runs `work` on the open device, or says why it cannot: closed, or lost.
    pub fn with_gpu<T>(&self, work: impl FnOnce(&mut Gpu) -> Result<T>) -> Result<T> {
        self.with_gpu_or_undo(work, |_, _| {})
    }

    /// As `with_gpu`, handing a successful result to `undo` (under the same lock) when the driver reports an
    /// error after all, so that what the work took (a pool range) is not lost with the result.
    pub fn with_gpu_or_undo<T>(
        &self,
        work: impl FnOnce(&mut Gpu) -> Result<T>,
        undo: impl FnOnce(&mut Gpu, T),
    ) -> Result<T> {
        let mut guard = lock(&self.gpu);
        let gpu = guard.as_mut().ok_or(Error::SessionClosed)?;
        if self.alarms.is_lost() {
            self.alarms.check()?;
        }
        let outcome = work(gpu)?;
        if let Err(alarm) = self.alarms.check() {
            undo(gpu, outcome);
            return Err(alarm);
        }
        Ok(outcome)
    }

    /// Gives a tensor's range back; a no-op once the session is closed (its slabs are gone already).
    pub fn release(&self, allocation: Allocation) {
        if let Some(gpu) = lock(&self.gpu).as_mut() {
            gpu.release(allocation);
        }
    }
}

static NEXT_SESSION_ID: AtomicU64 = AtomicU64::new(1);

/// A GPU session: the unit of ownership of device memory.
///
/// ```
/// use wgcompute::{Session, SessionOptions};
/// # fn main() -> wgcompute::Result<()> {
/// let session = Session::open(SessionOptions::default())?;
/// let x = session.upload(&[1.0, 2.0, 3.0], &[3])?;
/// x.scale_add_(2.0, 1.0)?;
/// assert_eq!(x.to_vec()?, vec![3.0, 5.0, 7.0]);
/// let report = session.close(); // every buffer, the device and the instance are gone now
/// println!("after close: {}", report.memory_after_close);
/// # Ok(()) }
/// ```
pub struct Session {
    inner: Arc<SessionInner>,
    adapter: AdapterSummary,
    adapter_info: wgpu::AdapterInfo,
    memory_before_open: DeviceMemory,
    memory_total: Option<u64>,
    closed: bool,
}

impl Session {
    /// Opens a device on the chosen adapter with the adapter's real limits.
    pub fn open(options: SessionOptions) -> Result<Session> {
        let (instance, adapter) = device::open_adapter(&options.adapter)?;
        let info = adapter.get_info();
        let memory_before_open = device::device_memory(&adapter);
        let limits = device::requested_limits(&adapter);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("wgcompute"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|error| Error::RequestDevice {
            adapter: info.name.clone(),
            reason: error.to_string(),
        })?;

        let alarms = Arc::new(Alarms::default());
        let on_lost = Arc::clone(&alarms);
        device.set_device_lost_callback(move |reason, message| {
            on_lost.device_lost(format!("{reason:?}: {message}"));
        });
        let on_error = Arc::clone(&alarms);
        device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
            on_error.uncaptured(error.to_string());
        }));

        let memory_total = memory_before_open.total;
        let limit = options
            .memory_limit
            .map(|limit| limit.resolve(memory_total))
            .transpose()?;
        let config = PoolConfig {
            limit,
            ..PoolConfig::for_limits(&limits)
        };
        let mut pool = Pool::new(
            WgpuSlabs {
                device: device.clone(),
            },
            config,
        );
        if options.reserve_up_front {
            pool.reserve_up_to_limit()?;
        }
        let params_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("wgcompute parameters"),
            size: PARAM_SLOTS * PARAM_SLOT_BYTES,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let gpu = Gpu {
            kernels: KernelCache::default(),
            batch: Batch {
                encoder: None,
                params: Vec::new(),
                params_buffer,
                recorded: 0,
                deferred_frees: Vec::new(),
            },
            pool,
            limits,
            poison_outputs: options.poison_outputs,
            matmul_kernel: match options.matmul_kernel {
                MatmulKernel::Auto if info.device_type == wgpu::DeviceType::Cpu => {
                    MatmulKernel::Registers
                }
                MatmulKernel::Auto => MatmulKernel::SharedTiles,
                chosen => chosen,
            },
            device,
            queue,
            adapter,
            instance,
        };
        Ok(Session {
            inner: Arc::new(SessionInner {
                gpu: Mutex::new(Some(gpu)),
                alarms,
                id: NEXT_SESSION_ID.fetch_add(1, Ordering::Relaxed),
            }),
            adapter: AdapterSummary {
                name: info.name.clone(),
                backend: device::backend_name(info.backend),
                device_type: device::device_type_name(info.device_type),
                driver: info.driver.clone(),
            },
            adapter_info: info,
            memory_before_open,
            memory_total,
            closed: false,
        })
    }

    pub(crate) fn inner(&self) -> &Arc<SessionInner> {
        &self.inner
    }

    pub fn adapter(&self) -> &AdapterSummary {
        &self.adapter
    }

    /// The device's memory as the driver (or, on CPU adapters, the OS) reports it; see [`DeviceMemory`].
    pub fn device_memory(&self) -> DeviceMemory {
        if let Some(gpu) = lock(&self.inner.gpu).as_ref() {
            return device::device_memory(&gpu.adapter);
        }
        device::device_memory_of(&self.adapter_info)
    }

    /// The device's total memory, where known.
    pub fn device_memory_total(&self) -> Option<u64> {
        self.memory_total
    }

    /// The pool's figures. After close: [`Error::SessionClosed`].
    pub fn memory_stats(&self) -> Result<MemoryStats> {
        self.inner.with_gpu(|gpu| Ok(gpu.pool.stats()))
    }

    /// Starts the peak figures again from the current ones.
    pub fn reset_peak(&self) -> Result<()> {
        self.inner.with_gpu(|gpu| {
            gpu.pool.reset_peak();
            Ok(())
        })
    }

    /// Destroys empty slabs, giving their memory back to the driver (PyTorch's `empty_cache`).
    pub fn trim(&self) -> Result<()> {
        self.inner.with_gpu(|gpu| {
            gpu.sync()?;
            let gone = gpu.pool.trim();
            gpu.kernels.forget_slabs(&gone);
            Ok(())
        })
    }

    /// Submits recorded work and waits for the device to finish it.
    pub fn sync(&self) -> Result<()> {
        self.inner.with_gpu(|gpu| gpu.sync())
    }

    /// Whether the device has been lost. A lost session still releases its memory on close.
    pub fn is_lost(&self) -> bool {
        self.inner.alarms.is_lost()
    }

    /// Destroys the device as a driver reset would, so that recovery paths can be tested.
    pub fn simulate_device_loss(&self) {
        if let Some(gpu) = lock(&self.inner.gpu).as_ref() {
            gpu.device.destroy();
        }
        self.inner
            .alarms
            .device_lost("simulated device loss".to_string());
    }

    /// Uploads f32 data as a new tensor of this shape.
    pub fn upload(&self, data: &[f32], shape: &[usize]) -> Result<Tensor> {
        Tensor::from_slice(self, data, shape)
    }

    /// A new tensor with unspecified contents; see [`Tensor::empty`].
    pub fn empty(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::empty(self, shape)
    }

    /// A new tensor of zeros.
    pub fn zeros(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::zeros(self, shape)
    }

    /// A new tensor filled with `value`.
    pub fn full(&self, shape: &[usize], value: f32) -> Result<Tensor> {
        Tensor::full(self, shape, value)
    }

    /// Waits for pending work, destroys every buffer and the device, drops queue, device, adapter and instance,
    /// and reports the memory before open, while open and after close.
    pub fn close(mut self) -> CloseReport {
        self.shut_down()
    }

    fn shut_down(&mut self) -> CloseReport {
        self.closed = true;
        let memory_while_open = self.device_memory();
        let device_lost = self.is_lost();
        let taken = lock(&self.inner.gpu).take();
        let mut pool_stats = MemoryStats::default();
        if let Some(gpu) = taken {
            pool_stats = gpu.pool.stats();
            release(gpu, device_lost);
        }
        CloseReport {
            memory_before_open: self.memory_before_open,
            memory_while_open,
            memory_after_close: self.device_memory(),
            pool: pool_stats,
            device_lost,
        }
    }
}

/// The release order, spelled out: finish work, destroy buffers, destroy the device, let wgpu reclaim, drop.
fn release(mut gpu: Gpu, device_lost: bool) {
    if !device_lost && gpu.sync().is_err() {
        // A device lost while closing still has its buffers destroyed below.
    }
    gpu.batch.encoder = None;
    gpu.batch.deferred_frees.clear();
    gpu.pool.destroy_all();
    gpu.batch.params_buffer.destroy();
    gpu.kernels.clear();
    gpu.device.destroy();
    // wgpu frees destroyed resources when the device is polled; a lost device may refuse, which is fine.
    let _ = gpu.device.poll(wgpu::PollType::wait_indefinitely());
    let Gpu {
        device,
        queue,
        pool,
        kernels,
        batch,
        adapter,
        instance,
        ..
    } = gpu;
    drop(kernels);
    drop(batch);
    drop(pool);
    drop(queue);
    drop(device);
    drop(adapter);
    drop(instance);
}

impl Drop for Session {
    fn drop(&mut self) {
        if !self.closed {
            self.shut_down();
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.inner.id)
            .field("adapter", &self.adapter.name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_limits_parse() {
        assert_eq!(
            "2GiB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(2 << 30))
        );
        assert_eq!(
            "512 MiB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(512 << 20))
        );
        assert_eq!(
            "1048576".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1 << 20))
        );
        assert_eq!(
            "1000b".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1000))
        );
        assert_eq!(
            "0.5".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Fraction(0.5))
        );
        assert_eq!(
            "1.0".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Fraction(1.0))
        );
        assert_eq!(
            "1.5GB".parse::<MemoryLimit>().ok(),
            Some(MemoryLimit::Bytes(1_500_000_000))
        );
    }

    #[test]
    fn ambiguous_or_empty_memory_limits_are_refused_with_the_accepted_forms() {
        for text in [
            "1.5",
            "1",
            "1000",
            "0",
            "0.0",
            "-1",
            "2 parsecs",
            "",
            "0GiB",
            "1e3",
            "nan",
            "1.2.3",
        ] {
            match text.parse::<MemoryLimit>() {
                Err(Error::InvalidArgument { expected, .. }) => assert!(
                    expected.contains("fraction") && expected.contains("unit"),
                    "'{text}': {expected}"
                ),
                other => panic!("'{text}' should be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn zero_bytes_and_fractions_outside_zero_to_one_are_refused_at_open() {
        assert!(MemoryLimit::Bytes(0).resolve(Some(1 << 30)).is_err());
        assert!(MemoryLimit::Fraction(1.5).resolve(Some(1 << 30)).is_err());
        assert!(MemoryLimit::Fraction(f64::NAN).resolve(None).is_err());
        assert!(matches!(
            MemoryLimit::Fraction(0.5).resolve(None),
            Err(Error::DeviceMemoryUnknown { .. })
        ));
        assert_eq!(
            MemoryLimit::Fraction(0.5).resolve(Some(1000)).ok(),
            Some(500)
        );
        assert_eq!(MemoryLimit::Bytes(7).resolve(None).ok(), Some(7));
    }
}
