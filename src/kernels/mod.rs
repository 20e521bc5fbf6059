//! Kernels: one module per op family, each owning its shaders/*.wgsl. A kernel takes the runtime, buffer
//! ranges and shapes, never a `Tensor` or a `Session`; validation and output allocation are the ops layer's.

/// For the reflection test below: a family's kernels, and its `Params` as (size, [(field, offset)]) for the
/// fields the WGSL struct must hold at the same offsets.
macro_rules! reflected_layout {
    (kernels: [$($kernel:expr),*], params: { $($field:ident),* }) => {
        reflected_layout!(kernels: [$($kernel),*], generated: std::iter::empty::<&'static Kernel>(), params: { $($field),* });
    };
    // `generated`: kernels made at run time from a table's rows, an iterator of `&'static Kernel`.
    (kernels: [$($kernel:expr),*], generated: $generated:expr, params: { $($field:ident),* }) => {
        #[cfg(test)]
        pub(crate) mod layout {
            use super::*;

            pub(crate) fn kernels() -> Vec<&'static Kernel> {
                let mut kernels: Vec<&'static Kernel> = vec![$(&$kernel),*];
                kernels.extend($generated);
                kernels
            }

            pub(crate) fn params() -> (usize, Vec<(&'static str, usize)>) {
                (
                    std::mem::size_of::<Params>(),
                    vec![$((stringify!($field), std::mem::offset_of!(Params, $field))),*],
                )
            }
        }
    };
}

pub(crate) mod creation;
pub(crate) mod elementwise;
pub(crate) mod layout;
pub(crate) mod linear;
pub(crate) mod logic;
pub(crate) mod matmul;
pub(crate) mod optim;
pub(crate) mod plan;
pub(crate) mod random;
pub(crate) mod reduce;
pub(crate) mod softmax;
pub(crate) mod sort;
pub(crate) mod window;

use crate::error::Result;
use crate::runtime::{BufferRange, Kernel, Runtime};
use crate::shape::MAX_RANK;

/// Temporary ranges of one kernel's work, given back to the pool when it ends (after the batch that uses them,
/// the pool ordering reuse behind recorded work).
#[derive(Default)]
pub(crate) struct Scratch {
    allocations: Vec<crate::pool::Allocation>,
}

impl Scratch {
    /// A range of `elements` 4-byte words, held until [`Scratch::release`].
    pub(crate) fn take(&mut self, runtime: &mut Runtime, elements: u64) -> Result<BufferRange> {
        let allocation = runtime.allocate(elements * 4)?;
        let range = BufferRange {
            slab: allocation.slab,
            offset: allocation.offset,
            bytes: elements * 4,
        };
        self.allocations.push(allocation);
        Ok(range)
    }

    pub(crate) fn release(self, runtime: &mut Runtime) {
        for allocation in self.allocations {
            runtime.release(allocation);
        }
    }
}

/// Every kernel family with variants, and its variants' names: what `SessionOptions::force_variant` accepts and
/// tuning records name.
pub fn kernel_variants() -> Vec<(&'static str, &'static [&'static str])> {
    vec![
        (softmax::FAMILY, softmax::VARIANTS),
        (matmul::FAMILY, matmul::VARIANTS),
        (linear::FAMILY, linear::VARIANTS),
        (reduce::CHUNK_FAMILY, reduce::CHUNK_VARIANTS),
        (reduce::AXIS_FAMILY, reduce::AXIS_VARIANTS),
        (elementwise::FAMILY, elementwise::VARIANTS),
        (optim::FAMILY, optim::VARIANTS),
        (window::FAMILY, window::VARIANTS),
    ]
}

/// The variants of the families with a scalar and a vec4 form (elementwise, optimizer updates).
pub(crate) const SCALAR: &str = "scalar";
pub(crate) const VEC4: &str = "vec4";
pub(crate) const VEC4X4: &str = "vec4x4";

/// How many vec4s one invocation of such a variant handles: none for the scalar one.
/// WGSL's `strided(linear, strides)`, shared by the shaders whose `Params` carry `dims` as [`MAX_RANK`] axes
/// in vec4s: the element at `strides` of the block's element `linear`, its coordinates taken off from the last
/// axis. Once what is left is 0 every coordinate before it is 0 too, so a low-rank shape pays for its own axes
/// only. `strides` is copied into a variable: SPIR-V and GLSL index a function's own variable at run time, not
/// an argument's value.
pub(crate) fn strided_wgsl() -> String {
    let (last, vec4s) = (MAX_RANK - 1, MAX_RANK / 4);
    format!(
        "fn strided(linear: u32, strides: array<vec4<u32>, {vec4s}>) -> u32 {{\n\
         \x20   var axis_strides = strides;\n\
         \x20   var rest = linear;\n\
         \x20   var index = 0u;\n\
         \x20   for (var axis = {last}u; rest != 0u; axis = axis - 1u) {{\n\
         \x20       let dim = params.dims[axis / 4u][axis % 4u];\n\
         \x20       index = index + (rest % dim) * axis_strides[axis / 4u][axis % 4u];\n\
         \x20       rest = rest / dim;\n\
         \x20       if (axis == 0u) {{\n\
         \x20           break;\n\
         \x20       }}\n\
         \x20   }}\n\
         \x20   return index;\n\
         }}\n"
    )
}

pub(crate) fn vec4s_per_invocation(variant: &str) -> u32 {
    match variant {
        VEC4 => 1,
        VEC4X4 => 4,
        _ => 0,
    }
}

/// Records an op with a vec4 and a scalar form over `elements` elements, one window at a time; a range paired
/// with true is bound as its window's part, one paired with false whole. In each window of `count` elements
/// from `first`, the vec4 kernel takes the whole vec4s, `vec4s` of them per invocation (none when 0), with
/// `body(first, count)` as parameters; then the scalar kernel takes the rest, with the parameters
/// `tail(body, start)` gives for the element of the window it starts at.
pub(crate) fn dispatch_vec4_windows<P: bytemuck::Pod>(
    runtime: &mut Runtime,
    (vec4, scalar): (&'static Kernel, &'static Kernel),
    ranges: &[(BufferRange, bool)],
    elements: u64,
    vec4s: u32,
    body: impl Fn(u64, u64) -> P,
    tail: impl Fn(P, u32) -> P,
) -> Result<()> {
    let limits = plan::Limits::of(runtime.limits());
    for (first, count) in limits.windows(elements) {
        let windows: Vec<BufferRange> = ranges
            .iter()
            .map(|&(range, windowed)| {
                if windowed {
                    range.elements(first, count)
                } else {
                    range
                }
            })
            .collect();
        let params = body(first, count);
        let whole = if vec4s == 0 { 0 } else { count / 4 };
        if whole > 0 {
            runtime.dispatch(
                vec4,
                bytemuck::bytes_of(&params),
                &windows,
                limits.per_element(whole, u64::from(vec4s)),
            )?;
        }
        let start = whole * 4;
        if start < count {
            runtime.dispatch(
                scalar,
                bytemuck::bytes_of(&tail(params, start as u32)),
                &windows,
                limits.per_element(count - start, 1),
            )?;
        }
    }
    Ok(())
}

/// Runs `kernel` over `elements` elements of same-sized operands, one dispatch per window and one invocation
/// per `per_invocation` elements; `params` gives each window's uniform block from (first element, count).
pub(crate) fn dispatch_windows<P: bytemuck::Pod>(
    runtime: &mut Runtime,
    kernel: &'static Kernel,
    ranges: &[BufferRange],
    elements: u64,
    per_invocation: u64,
    params: impl Fn(u64, u64) -> P,
) -> Result<()> {
    let limits = plan::Limits::of(runtime.limits());
    for (first, count) in limits.windows(elements) {
        let windows: Vec<BufferRange> = ranges
            .iter()
            .map(|range| range.elements(first, count))
            .collect();
        let workgroups = limits.per_element(count, per_invocation);
        runtime.dispatch(
            kernel,
            bytemuck::bytes_of(&params(first, count)),
            &windows,
            workgroups,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod reflection {
    //! Rust names kernels, bindings and parameter layouts that the WGSL must agree with; naga's reflection of
    //! each shader checks that it does, so a change on one side alone fails here rather than at dispatch.

    use std::collections::BTreeMap;

    use crate::runtime::{Kernel, Shader};

    type Family = (Vec<&'static Kernel>, (usize, Vec<(&'static str, usize)>));

    fn families() -> Vec<Family> {
        macro_rules! families {
            ($($($module:ident)::+),*) => {
                vec![$((super::$($module)::+::layout::kernels(), super::$($module)::+::layout::params())),*]
            };
        }
        families!(
            creation,
            elementwise,
            layout,
            linear,
            logic,
            matmul,
            optim,
            random,
            reduce,
            reduce::subgroup,
            softmax,
            sort,
            window
        )
    }

    fn parse(shader: &Shader) -> naga::Module {
        let source = shader.assembled();
        naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|error| panic!("{}: {}", shader.name, error.emit_to_string(&source)))
    }

    #[test]
    fn every_shader_file_is_used_and_validates_as_assembled() {
        let mut used: Vec<&str> = families()
            .iter()
            .map(|(kernels, _)| kernels[0].shader.name)
            .collect();
        used.sort_unstable();
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
        let mut files: Vec<String> = std::fs::read_dir(folder)
            .expect("the shaders folder")
            .filter_map(|entry| {
                let name = entry.ok()?.file_name().into_string().ok()?;
                name.strip_suffix(".wgsl").map(str::to_string)
            })
            .collect();
        files.sort_unstable();
        assert_eq!(
            files, used,
            "every shaders/*.wgsl is one kernel family, and back"
        );
        for (kernels, _) in families() {
            let shader = kernels[0].shader;
            let module = parse(shader);
            // Only the subgroup module may use subgroup operations: the others must build on every device.
            let subgroups = std::ptr::eq(shader, &super::reduce::REDUCE_SUBGROUP);
            let (capabilities, stages, operations) = if subgroups {
                (
                    naga::valid::Capabilities::SUBGROUP,
                    naga::valid::ShaderStages::COMPUTE,
                    naga::valid::SubgroupOperationSet::all(),
                )
            } else {
                (
                    naga::valid::Capabilities::empty(),
                    naga::valid::ShaderStages::empty(),
                    naga::valid::SubgroupOperationSet::empty(),
                )
            };
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities)
                .subgroup_stages(stages)
                .subgroup_operations(operations)
                .validate(&module)
                .unwrap_or_else(|error| {
                    panic!(
                        "{}: {}",
                        shader.name,
                        error.emit_to_string(&shader.assembled())
                    )
                });
        }
    }

    #[test]
    fn an_unknown_elementwise_op_code_is_nan_not_another_op() {
        let generated = (super::elementwise::layout::kernels()[0].shader.generated)();
        for function in ["fn unary_op", "fn binary_op"] {
            let body = &generated[generated.find(function).expect(function)..];
            let body = &body[..body.find("\n}\n").expect("the function ends")];
            assert!(
                body.contains("default: { return nan(); }"),
                "{function}: {body}"
            );
        }
    }

    /// group 0 bindings of the module's storage and uniform variables, each with its type.
    fn bindings(module: &naga::Module) -> BTreeMap<u32, naga::Handle<naga::Type>> {
        module
            .global_variables
            .iter()
            .filter_map(|(_, variable)| {
                let binding = variable.binding.as_ref()?;
                (binding.group == 0).then_some((binding.binding, variable.ty))
            })
            .collect()
    }

    #[test]
    fn every_kernel_names_an_entry_point_and_bindings_its_shader_has() {
        for (kernels, _) in families() {
            for kernel in kernels {
                let module = parse(kernel.shader);
                assert!(
                    module
                        .entry_points
                        .iter()
                        .any(|entry| entry.name == kernel.entry),
                    "{}: no entry point '{}'",
                    kernel.shader.name,
                    kernel.entry
                );
                let declared = bindings(&module);
                for binding in std::iter::once(&0).chain(kernel.bindings) {
                    assert!(
                        declared.contains_key(binding),
                        "{}::{}: binding {binding} is bound from Rust but not declared in the shader",
                        kernel.shader.name,
                        kernel.entry
                    );
                }
            }
        }
    }

    #[test]
    fn every_params_struct_has_the_same_size_and_offsets_in_rust_and_wgsl() {
        for (kernels, (size, fields)) in families() {
            let shader = kernels[0].shader;
            let module = parse(shader);
            let ty = bindings(&module)[&0];
            let naga::TypeInner::Struct { members, span } = &module.types[ty].inner else {
                panic!("{}: binding 0 is not a struct", shader.name);
            };
            assert_eq!(
                *span as usize, size,
                "{}: Params size, WGSL vs Rust",
                shader.name
            );
            for (name, offset) in fields {
                let member = members
                    .iter()
                    .find(|member| member.name.as_deref() == Some(name))
                    .unwrap_or_else(|| panic!("{}: Params.{name} is missing in WGSL", shader.name));
                assert_eq!(
                    member.offset as usize, offset,
                    "{}: Params.{name} offset, WGSL vs Rust",
                    shader.name
                );
            }
        }
    }
}
