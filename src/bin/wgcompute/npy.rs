//! .npy files in and out: float32 arrays read with their shape, checked for dtype and order with errors that
//! name the file and what was found; results written back as float32 or int64.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use npyz::{TypeChar, WriterBuilder};
use wgcompute::{Session, Tensor, MAX_RANK};

/// A float32 array read from a .npy file, remembered with its path for error messages.
pub struct Array {
    pub path: PathBuf,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Array {
    pub fn read(path: &Path) -> Result<Array> {
        let name = path.display();
        let bytes = fs::read(path).with_context(|| format!("cannot read {name}"))?;
        let file = npyz::NpyFile::new(&bytes[..])
            .map_err(|error| anyhow!("{name} is not a .npy file ({error})"))?;
        let dtype = file.dtype();
        let is_f32 = matches!(
            &dtype,
            npyz::DType::Plain(ty) if ty.type_char() == TypeChar::Float && ty.size_field() == 4
        );
        if !is_f32 {
            bail!(
                "{name} holds {}; wgcompute needs float32 ('<f4')",
                describe_dtype(&dtype)
            );
        }
        if file.order() == npyz::Order::Fortran {
            bail!("{name} is stored in Fortran order; wgcompute needs C order (numpy.ascontiguousarray before saving)");
        }
        let shape = file
            .shape()
            .iter()
            .map(|&dim| usize::try_from(dim))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| anyhow!("{name}: shape {:?} is too large", file.shape()))?;
        let data = file.into_vec::<f32>().map_err(|error| {
            if error.kind() == std::io::ErrorKind::UnexpectedEof {
                anyhow!("{name} is truncated: its header gives shape {shape:?}, but the data ends early")
            } else {
                anyhow!("cannot read the data of {name}: {error}")
            }
        })?;
        Ok(Array {
            path: path.to_path_buf(),
            shape,
            data,
        })
    }

    pub fn name(&self) -> std::path::Display<'_> {
        self.path.display()
    }

    /// `path [shape]`, for errors about shapes.
    pub fn described(&self) -> String {
        format!("{} {:?}", self.path.display(), self.shape)
    }

    pub fn expect_rank_at_most(&self, rank: usize, what: &str) -> Result<()> {
        if self.shape.len() > rank {
            bail!(
                "{} has {} axes; {what} takes at most {rank}",
                self.described(),
                self.shape.len()
            );
        }
        Ok(())
    }

    pub fn upload(&self, session: &Session) -> Result<Tensor> {
        self.expect_rank_at_most(MAX_RANK, "a wgcompute tensor")?;
        session
            .upload(&self.data, &self.shape)
            .with_context(|| format!("uploading {}", self.name()))
    }
}

/// How numpy would name a dtype: "float64 ('<f8')".
fn describe_dtype(dtype: &npyz::DType) -> String {
    let npyz::DType::Plain(ty) = dtype else {
        return format!("a structured dtype ({})", dtype.descr());
    };
    let bits = ty.size_field() * 8;
    let name = match ty.type_char() {
        TypeChar::Float => format!("float{bits}"),
        TypeChar::Int => format!("int{bits}"),
        TypeChar::Uint => format!("uint{bits}"),
        TypeChar::Complex => format!("complex{bits}"),
        TypeChar::Bool => "bool".to_string(),
        TypeChar::ByteStr | TypeChar::UnicodeStr => "strings".to_string(),
        TypeChar::Object => "Python objects".to_string(),
        TypeChar::TimeDelta => "timedelta64".to_string(),
        TypeChar::DateTime => "datetime64".to_string(),
        _ => "data".to_string(),
    };
    format!("{name} ('{ty}')")
}

fn shape_u64(shape: &[usize]) -> Vec<u64> {
    shape.iter().map(|&dim| dim as u64).collect()
}

pub fn write_npy<T: npyz::AutoSerialize + Copy>(
    path: &Path,
    shape: &[usize],
    data: &[T],
) -> Result<()> {
    let name = path.display();
    let file = fs::File::create(path).with_context(|| format!("cannot create {name}"))?;
    let mut buffered = BufWriter::new(file);
    let mut writer = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(&shape_u64(shape))
        .writer(&mut buffered)
        .begin_nd()
        .with_context(|| format!("cannot write {name}"))?;
    writer
        .extend(data.iter().copied())
        .and_then(|()| writer.finish())
        .with_context(|| format!("cannot write {name}"))?;
    buffered
        .flush()
        .with_context(|| format!("cannot write {name}"))
}
