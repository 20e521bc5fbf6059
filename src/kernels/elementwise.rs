//! Elementwise kernels (shaders/elementwise.wgsl): in-place fill and scale-and-add, bound in windows so they
//! work on tensors larger than one storage binding.

use bytemuck::{Pod, Zeroable};

use super::{dispatch, grid, windows, Access, Family, Kernel, WORKGROUP_SIZE};
use crate::error::Result;
use crate::session::{BufferRange, Gpu};

static ELEMENTWISE: Family = Family {
    name: "elementwise",
    source: include_str!("../../shaders/elementwise.wgsl"),
};

static FILL: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "fill",
    storage: &[Access::ReadWrite],
};

static SCALE_ADD: Kernel = Kernel {
    family: &ELEMENTWISE,
    entry: "scale_add",
    storage: &[Access::ReadWrite],
};

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    count: u32,
    _pad0: u32,
    a: f32,
    b: f32,
}

fn in_place(
    gpu: &mut Gpu,
    kernel: &'static Kernel,
    range: BufferRange,
    elements: u64,
    a: f32,
    b: f32,
) -> Result<()> {
    for (_, count, window) in windows(gpu, range, elements) {
        let params = Params {
            count: count as u32,
            _pad0: 0,
            a,
            b,
        };
        let groups = grid(gpu, (count as u32).div_ceil(WORKGROUP_SIZE));
        dispatch(gpu, kernel, bytemuck::bytes_of(&params), &[window], groups)?;
    }
    Ok(())
}

/// values = value
pub(crate) fn fill(gpu: &mut Gpu, range: BufferRange, elements: u64, value: f32) -> Result<()> {
    in_place(gpu, &FILL, range, elements, value, 0.0)
}

/// values = values * scale + shift
pub(crate) fn scale_add(
    gpu: &mut Gpu,
    range: BufferRange,
    elements: u64,
    scale: f32,
    shift: f32,
) -> Result<()> {
    in_place(gpu, &SCALE_ADD, range, elements, scale, shift)
}
