//! Suspend and resume: a runtime's live ranges copied to the host and the device released as a close releases
//! it; later, a device opened anew (on the same adapter or another) with the same slabs, and the ranges written
//! back. The pool's layout survives on the host, so every tensor's `Allocation` is valid again without being
//! re-pointed one by one.

use crate::error::{Error, Result};
use crate::pool::{Allocation, Pool, PoolLayout, SlabId};

use super::{
    release_all, within_error_scopes, OpenedDevice, Refusal, Runtime, RuntimeSettings, WgpuSlabs,
};

/// Bytes read back (or written) through one staging buffer: large enough that few round trips are needed,
/// small enough that a GPU's host-visible heap has room for it beside the slabs.
const STAGING_BYTES: u64 = 64 << 20;

/// A piece of a slab's contents, kept on the host.
struct SavedPiece {
    slab: SlabId,
    offset: u64,
    bytes: Vec<u8>,
}

/// A suspended session: its pool's layout and the contents of every range that was live at the suspend.
pub(crate) struct Suspension {
    pub(super) layout: PoolLayout,
    saved: Vec<SavedPiece>,
}

impl Suspension {
    /// Forgets a range a tensor dropped while suspended, and the host copy of its bytes. A slab left empty is
    /// not recreated, and its bytes are freed. A range inside a piece that also holds live neighbours is cut
    /// out of it when it is at least a quarter of the piece (the neighbours are copied into pieces of their
    /// own, so the copying stays under three times the bytes freed); a smaller one keeps its bytes until
    /// resume, where they are written into free space, which does no harm.
    pub fn release(&mut self, allocation: Allocation) {
        let (slab, start, end) = (
            allocation.slab,
            allocation.offset,
            allocation.offset + allocation.bytes,
        );
        self.layout.free(allocation);
        if self.layout.slab_bytes(slab).is_none() {
            // The slab will not come back, so neither will any of its bytes.
            self.saved.retain(|piece| piece.slab != slab);
            return;
        }
        let mut kept = Vec::with_capacity(self.saved.len() + 1);
        for piece in std::mem::take(&mut self.saved) {
            kept.extend(piece.without(slab, start..end));
        }
        self.saved = kept;
    }
}

impl SavedPiece {
    /// This piece without the bytes of `range` in `slab`, where that frees enough to be worth a copy of the
    /// rest (see `Suspension::release`): nothing, one piece or two.
    fn without(self, slab: SlabId, range: std::ops::Range<u64>) -> Vec<SavedPiece> {
        let end = self.offset + self.bytes.len() as u64;
        let (cut_start, cut_end) = (range.start.max(self.offset), range.end.min(end));
        let length = self.bytes.len() as u64;
        if self.slab != slab || cut_start >= cut_end || 4 * (cut_end - cut_start) < length {
            return vec![self];
        }
        let before = (cut_start - self.offset) as usize;
        let after = (cut_end - self.offset) as usize;
        let mut parts = Vec::with_capacity(2);
        if before > 0 {
            parts.push(SavedPiece {
                slab,
                offset: self.offset,
                bytes: self.bytes[..before].to_vec(),
            });
        }
        if after < self.bytes.len() {
            parts.push(SavedPiece {
                slab,
                offset: cut_end,
                bytes: self.bytes[after..].to_vec(),
            });
        }
        parts
    }
}

/// What a suspend kept.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SuspendFigures {
    pub host_bytes: u64,
    pub tensors: u64,
}

/// What a resume wrote back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ResumeFigures {
    pub bytes_uploaded: u64,
    pub tensors: u64,
}

/// Splits live ranges into pieces no larger than the staging buffer, joining neighbours so that a pool full of
/// small tensors costs few copies: (slab, offset, bytes).
fn pieces(live: impl Iterator<Item = (SlabId, u64, u64)>) -> Vec<(SlabId, u64, u64)> {
    let mut joined: Vec<(SlabId, u64, u64)> = Vec::new();
    for (slab, offset, bytes) in live {
        match joined.last_mut() {
            Some(last) if last.0 == slab && last.1 + last.2 == offset => last.2 += bytes,
            _ => joined.push((slab, offset, bytes)),
        }
    }
    let mut pieces = Vec::with_capacity(joined.len());
    for (slab, mut offset, mut bytes) in joined {
        while bytes > 0 {
            let take = bytes.min(STAGING_BYTES);
            pieces.push((slab, offset, take));
            offset += take;
            bytes -= take;
        }
    }
    pieces
}

/// Groups pieces so that each group fits one staging buffer.
fn staging_groups(pieces: &[(SlabId, u64, u64)]) -> Vec<&[(SlabId, u64, u64)]> {
    let mut groups = Vec::new();
    let mut start = 0;
    let mut filled = 0;
    for (index, piece) in pieces.iter().enumerate() {
        if filled + piece.2 > STAGING_BYTES && index > start {
            groups.push(&pieces[start..index]);
            start = index;
            filled = 0;
        }
        filled += piece.2;
    }
    if start < pieces.len() {
        groups.push(&pieces[start..]);
    }
    groups
}

impl Runtime {
    /// The error for a buffer of `bytes` the driver refused during a suspend or resume.
    fn refused(&self, op: &'static str, bytes: u64, refusal: Refusal) -> Error {
        match refusal {
            Refusal::OutOfMemory => {
                let stats = self.pool.stats();
                Error::OutOfMemory {
                    requested: bytes,
                    in_use: stats.in_use,
                    reserved: stats.reserved,
                    limit: stats.limit,
                    by_driver: true,
                }
            }
            Refusal::Invalid(error) => Error::driver_caused(op, error.to_string(), error),
        }
    }

    /// Copies every live range to the host, then releases everything as a close does. On failure the runtime
    /// comes back untouched.
    pub(super) fn suspend(
        mut self,
    ) -> std::result::Result<(Suspension, SuspendFigures), (Box<Runtime>, Error)> {
        let saved = match self.save_live_ranges() {
            Ok(saved) => saved,
            Err(error) => return Err((Box::new(self), error)),
        };
        let layout = self.pool.detach();
        let figures = SuspendFigures {
            host_bytes: saved.iter().map(|piece| piece.bytes.len() as u64).sum(),
            tensors: layout.allocations(),
        };
        release_all(self, false);
        Ok((Suspension { layout, saved }, figures))
    }

    fn save_live_ranges(&mut self) -> Result<Vec<SavedPiece>> {
        self.alarms.check()?;
        self.sync()?;
        let pieces = pieces(self.pool.live_ranges());
        let groups = staging_groups(&pieces);
        let mut saved = Vec::with_capacity(pieces.len());
        let Some(largest) = groups
            .iter()
            .map(|group| group.iter().map(|piece| piece.2).sum::<u64>())
            .max()
        else {
            return Ok(saved);
        };
        // One staging buffer, reused by every group: its memory is touched once, not once per group.
        let (staging, refusal) = within_error_scopes(&self.device, || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("wgcompute suspend"),
                size: largest,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        if let Some(refusal) = refusal {
            staging.destroy();
            return Err(self.refused("suspend", largest, refusal));
        }
        let mut outcome = Ok(());
        for group in groups {
            match self.read_group(group, &staging) {
                Ok(pieces) => saved.extend(pieces),
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        staging.destroy();
        outcome?;
        self.alarms.check()?;
        Ok(saved)
    }

    /// Copies each piece of `group` into `staging`, back to back, and reads them out of it.
    fn read_group(
        &mut self,
        group: &[(SlabId, u64, u64)],
        staging: &wgpu::Buffer,
    ) -> Result<Vec<SavedPiece>> {
        let mut encoder = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("wgcompute suspend"),
            });
        let mut at = 0;
        for &(slab, offset, length) in group {
            encoder.copy_buffer_to_buffer(self.buffer(slab)?, offset, staging, at, length);
            at += length;
        }
        self.queue.submit([encoder.finish()]);
        self.map_and_read(staging, |bytes| {
            let mut at = 0usize;
            group
                .iter()
                .map(|&(slab, offset, length)| {
                    let end = at + length as usize;
                    let piece = SavedPiece {
                        slab,
                        offset,
                        bytes: bytes[at..end].to_vec(),
                    };
                    at = end;
                    piece
                })
                .collect()
        })
    }

    /// Opens a runtime on `opened` with the suspended layout's slabs and writes their contents back; returns it
    /// with the bytes written. On failure the new device is released and the suspension comes back with nothing
    /// lost.
    #[allow(clippy::result_large_err)] // once per resume; the suspension must come back whole on failure
    pub(crate) fn restore(
        opened: OpenedDevice,
        settings: RuntimeSettings,
        suspension: Suspension,
    ) -> std::result::Result<(Runtime, u64), (Error, Suspension)> {
        let Suspension { layout, saved } = suspension;
        let storage = WgpuSlabs {
            device: opened.device.clone(),
        };
        let pool = match Pool::restore(storage, layout, settings.pool) {
            Ok(pool) => pool,
            Err((error, layout)) => {
                release_opened(opened);
                return Err((error, Suspension { layout, saved }));
            }
        };
        let mut runtime = Runtime::around(opened, settings, pool);
        match runtime.write_back(&saved) {
            Ok(written) => Ok((runtime, written)),
            Err(error) => {
                let layout = runtime.pool.detach();
                release_all(runtime, false);
                Err((error, Suspension { layout, saved }))
            }
        }
    }

    /// Writes the pieces back a staging buffer's worth at a time, each group submitted and waited for, so that
    /// the queue's staging copies never hold more than that at once and a refusal is an error, not an alarm.
    /// Returns the bytes written (a slab cut at the restore leaves out the free space past its cut).
    fn write_back(&mut self, saved: &[SavedPiece]) -> Result<u64> {
        let mut written = 0;
        let mut start = 0;
        while start < saved.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < saved.len()
                && (end == start || bytes + saved[end].bytes.len() as u64 <= STAGING_BYTES)
            {
                bytes += saved[end].bytes.len() as u64;
                end += 1;
            }
            let ((), refusal) = within_error_scopes(&self.device, || {
                for piece in &saved[start..end] {
                    // A cut may have taken the end of a piece's slab with it: those bytes were free space.
                    let (Some(buffer), Some(slab_bytes)) = (
                        self.pool.buffer(piece.slab),
                        self.pool.slab_bytes(piece.slab),
                    ) else {
                        continue;
                    };
                    let kept = slab_bytes
                        .saturating_sub(piece.offset)
                        .min(piece.bytes.len() as u64);
                    if kept > 0 {
                        written += kept;
                        self.queue.write_buffer(
                            buffer,
                            piece.offset,
                            &piece.bytes[..kept as usize],
                        );
                    }
                }
                // wgpu hands queue writes to the device with the next submission, even an empty one.
                self.queue.submit([]);
            });
            if let Some(refusal) = refusal {
                return Err(self.refused("resume", bytes, refusal));
            }
            self.wait(false)?;
            start = end;
        }
        self.sync()?;
        if self.reserve_up_front {
            self.pool.reserve_up_to_limit()?;
        }
        self.alarms.check()?;
        Ok(written)
    }
}

/// Releases a device that never became a runtime, in the same order a close uses.
pub(super) fn release_opened(opened: OpenedDevice) {
    opened.device.destroy();
    let _ = opened.device.poll(wgpu::PollType::wait_indefinitely());
    // Queue, device, adapter, instance, alarms: the fields' order.
    drop(opened);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbouring_ranges_join_and_large_ones_split_at_the_staging_size() {
        let live = [
            (0, 0, 256),
            (0, 256, 512),
            (0, 1024, 256),
            (1, 0, STAGING_BYTES + 256),
            (2, 0, 256),
        ];
        assert_eq!(
            pieces(live.into_iter()),
            vec![
                (0, 0, 768),
                (0, 1024, 256),
                (1, 0, STAGING_BYTES),
                (1, STAGING_BYTES, 256),
                (2, 0, 256),
            ]
        );
    }

    fn piece(offset: u64, length: usize) -> SavedPiece {
        SavedPiece {
            slab: 3,
            offset,
            bytes: (0..length).map(|byte| byte as u8).collect(),
        }
    }

    fn spans(pieces: &[SavedPiece]) -> Vec<(u64, u64)> {
        pieces
            .iter()
            .map(|piece| (piece.offset, piece.offset + piece.bytes.len() as u64))
            .collect()
    }

    #[test]
    fn a_dropped_range_is_cut_out_of_its_piece_when_it_frees_a_quarter() {
        // The whole piece: nothing is left.
        assert!(piece(256, 512).without(3, 256..768).is_empty());
        // The middle half: the two neighbours stay, with their own bytes.
        let parts = piece(0, 1024).without(3, 256..768);
        assert_eq!(spans(&parts), vec![(0, 256), (768, 1024)]);
        assert_eq!(parts[0].bytes, piece(0, 1024).bytes[..256]);
        assert_eq!(parts[1].bytes, piece(0, 1024).bytes[768..]);
        // The head or the tail.
        assert_eq!(spans(&piece(0, 1024).without(3, 0..256)), vec![(256, 1024)]);
        assert_eq!(spans(&piece(0, 1024).without(3, 768..1024)), vec![(0, 768)]);
        // Under a quarter of the piece: kept whole, its bytes written back into free space at resume.
        assert_eq!(spans(&piece(0, 1024).without(3, 256..480)), vec![(0, 1024)]);
        // Another slab, or a range beside the piece: untouched.
        assert_eq!(spans(&piece(0, 1024).without(4, 0..1024)), vec![(0, 1024)]);
        assert_eq!(
            spans(&piece(0, 1024).without(3, 1024..2048)),
            vec![(0, 1024)]
        );
    }

    #[test]
    fn staging_groups_never_exceed_the_staging_size_and_keep_every_piece_in_order() {
        let pieces = vec![
            (0, 0, STAGING_BYTES / 2),
            (0, STAGING_BYTES, STAGING_BYTES / 2),
            (1, 0, 256),
            (2, 0, STAGING_BYTES),
            (3, 0, 256),
        ];
        let groups = staging_groups(&pieces);
        assert_eq!(groups.concat(), pieces);
        for group in &groups {
            let total: u64 = group.iter().map(|piece| piece.2).sum();
            assert!(total <= STAGING_BYTES, "{group:?}");
        }
        assert_eq!(groups.len(), 4);
        assert!(staging_groups(&[]).is_empty());
    }
}
