//! .npy files in and out. Reading takes untrusted bytes from anywhere, so it is our own small reader: the header
//! is bounded (10,000 bytes, NumPy's default `max_header_size`) and parsed by the flat dict grammar NumPy writes,
//! with no nesting and so no way to make it slow; the element count and byte size come from checked arithmetic
//! and are compared with the bytes the file really has before anything is allocated for them; reads stop one byte
//! past what the header describes, so a pipe or `/dev/zero` costs no more memory than a real file would.
//! Every error names the file and what was found. Results are written back as float32 or int64.
//!
//! npyz 0.9 (which the tests use to write inputs) cannot be the reader behind a small guard, because the guard
//! would have to be this parser. npyz computes a shape's element count and strides unchecked inside its header
//! parse, before a caller sees the shape, so a count past 2^64 panics there (or wraps where overflow checks are off).
//! It refuses spellings NumPy reads ('f4', '=f4', '|f4', u'<f4', 2L). It takes what is refused here (escapes, a
//! list for the shape, repeated and unknown keys) and never names an unknown key. Its errors span several lines,
//! and its grammar takes time exponential in the depth of nesting.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use wgcompute::{Session, Tensor, MAX_RANK};

/// NumPy's default `max_header_size`: a longer header is refused before it is read.
pub const MAX_HEADER_BYTES: usize = 10_000;
const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// How much is read at a time when the size of the source is not known in advance.
const CHUNK: usize = 64 * 1024;
const NEED_F32: &str =
    "wgcompute needs floats: float32 ('<f4'), or float16 or float64, which are rounded to float32";

/// A float32 array read from a .npy file, remembered with its path for error messages.
pub struct Array {
    pub path: PathBuf,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Array {
    pub fn read(path: &Path) -> Result<Array> {
        let (shape, values) = read_path(path, Want::Float32)?;
        let Values::F32(data) = values else {
            bail!("{} does not hold float32", path.display());
        };
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

    /// Refuses NaN and infinities, naming the first one's flat (C-order) index.
    pub fn expect_finite(&self, what: &str) -> Result<()> {
        if let Some((index, value)) = self
            .data
            .iter()
            .enumerate()
            .find(|(_, value)| !value.is_finite())
        {
            bail!(
                "{} holds {value} at flat index {index}; {what} needs finite numbers",
                self.described()
            );
        }
        Ok(())
    }

    /// Refuses negative values (targets of softmax cross-entropy, whose loss a negative one makes unbounded
    /// below), naming the first one's flat index.
    pub fn expect_non_negative(&self, what: &str) -> Result<()> {
        if let Some((index, value)) = self.data.iter().enumerate().find(|(_, &value)| value < 0.0) {
            bail!(
                "{} holds {value} at flat index {index}; {what} must be 0 or more",
                self.described()
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

/// An integer array (any of int8…int64, uint8…uint64) read from a .npy file, widened to int64.
pub struct IntArray {
    pub path: PathBuf,
    pub shape: Vec<usize>,
    pub data: Vec<i64>,
}

impl IntArray {
    pub fn read(path: &Path) -> Result<IntArray> {
        let (shape, values) = read_path(path, Want::Integer)?;
        let Values::I64(data) = values else {
            bail!("{} does not hold integers", path.display());
        };
        Ok(IntArray {
            path: path.to_path_buf(),
            shape,
            data,
        })
    }
}

/// The element types a caller takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    Float32,
    #[cfg_attr(not(test), allow(dead_code))]
    Integer,
}

/// The data of an array, as the caller asked for it.
#[derive(Debug, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

impl Values {
    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            Values::F32(data) => data.len(),
            Values::I64(data) => data.len(),
        }
    }
}

fn read_path(path: &Path, want: Want) -> Result<(Vec<usize>, Values)> {
    let name = path.display().to_string();
    let mut file = File::open(path).with_context(|| format!("cannot read {name}"))?;
    let metadata = file
        .metadata()
        .with_context(|| format!("cannot read {name}"))?;
    // Only a regular file's length says how many bytes there are; a pipe or a device says nothing.
    let size = metadata.is_file().then_some(metadata.len());
    parse(&mut file, size, &name, want)
}

/// Reads one .npy array from `reader`, whose total length is `size` bytes when known (a regular file). `name`
/// names the source in errors. Never allocates more than the header (at most [`MAX_HEADER_BYTES`]) before the
/// data is known to be there, and never reads more than one byte past what the header describes.
pub fn parse(
    reader: &mut impl Read,
    size: Option<u64>,
    name: &str,
    want: Want,
) -> Result<(Vec<usize>, Values)> {
    let mut preamble = [0u8; 8];
    let got = read_full(reader, &mut preamble).with_context(|| format!("cannot read {name}"))?;
    if got < MAGIC.len() || preamble[..MAGIC.len()] != MAGIC[..] {
        let why = match got {
            0 => "it is empty".to_string(),
            _ if got < MAGIC.len() && preamble[..got] == MAGIC[..got] => {
                format!("it ends after {got} bytes")
            }
            _ => "it does not begin with \\x93NUMPY".to_string(),
        };
        bail!("{name} is not a .npy file ({why})");
    }
    if got < preamble.len() {
        bail!("{name} is truncated: it ends inside the .npy preamble");
    }
    let (major, minor) = (preamble[6], preamble[7]);
    let length_bytes = match (major, minor) {
        (1, 0) => 2,
        (2, 0) | (3, 0) => 4,
        _ => bail!(
            "{name} is a .npy file of format version {major}.{minor}; wgcompute reads versions 1.0, 2.0 and 3.0"
        ),
    };
    let mut length = [0u8; 4];
    if read_full(reader, &mut length[..length_bytes])
        .with_context(|| format!("cannot read {name}"))?
        < length_bytes
    {
        bail!("{name} is truncated: it ends inside the .npy preamble");
    }
    let header_length = u32::from_le_bytes(length);
    if header_length as usize > MAX_HEADER_BYTES {
        bail!(
            "{name} has a .npy header of {header_length} bytes; headers over {MAX_HEADER_BYTES} bytes are refused \
             (as NumPy does by default)"
        );
    }
    let mut header = vec![0u8; header_length as usize];
    if read_full(reader, &mut header).with_context(|| format!("cannot read {name}"))? < header.len()
    {
        bail!("{name} is truncated: it ends inside its .npy header");
    }
    // Versions 1 and 2 are latin-1, version 3 UTF-8; the grammar itself is ASCII either way.
    let text = if major == 3 {
        String::from_utf8(header).map_err(|_| {
            anyhow::anyhow!("{name} has a version 3.0 .npy header that is not UTF-8")
        })?
    } else {
        header.iter().map(|&byte| char::from(byte)).collect()
    };
    let header = match parse_header(&text) {
        Ok(header) => header,
        Err(HeaderError::Structured) => {
            bail!(
                "{name} holds a structured dtype (a list of fields); {}",
                want.need()
            )
        }
        Err(HeaderError::Malformed(why)) => bail!("{name} has a malformed .npy header: {why}"),
    };
    let element = Element::from_descr(&header.descr, want).ok_or_else(|| {
        anyhow::anyhow!(
            "{name} holds {}; {}",
            describe_dtype(&header.descr),
            want.need()
        )
    })?;
    if header.fortran_order {
        bail!("{name} is stored in Fortran order; wgcompute needs C order (numpy.ascontiguousarray before saving)");
    }
    let what = format!("shape {:?} of {}", header.shape, element.name());
    let count = header
        .shape
        .iter()
        .try_fold(1u64, |count, &dim| count.checked_mul(dim))
        .with_context(|| format!("{name}: its header gives {what}, more than 2^64 elements"))?;
    let bytes = count
        .checked_mul(element.size() as u64)
        .with_context(|| format!("{name}: its header gives {what}, more than 2^64 bytes"))?;
    let data_start = (8 + length_bytes) as u64 + u64::from(header_length);
    let available = size.map(|size| size.saturating_sub(data_start));
    let what = format!("{what}, {bytes} bytes of data");
    match available {
        Some(available) if available < bytes => {
            bail!("{name} is truncated: its header gives {what}, but only {available} bytes follow")
        }
        Some(available) if available > bytes => bail!(
            "{name} has {} bytes after the data its header describes ({what}); a .npy file holds one array",
            available - bytes
        ),
        _ => {}
    }
    let (Ok(count), Ok(bytes)) = (usize::try_from(count), usize::try_from(bytes)) else {
        bail!("{name}: its header gives {what}, more than this machine can address");
    };
    let raw = read_data(reader, bytes, available.is_some(), name, &what)?;
    let values = element.decode(&raw, name)?;
    debug_assert_eq!(
        match &values {
            Values::F32(data) => data.len(),
            Values::I64(data) => data.len(),
        },
        count
    );
    // Each dimension divides the element count, which fits in usize, unless another one is 0.
    let shape = header
        .shape
        .iter()
        .map(|&dim| usize::try_from(dim))
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("{name}: {what} has a dimension over this machine's usize"))?;
    Ok((shape, values))
}

impl Want {
    fn need(self) -> &'static str {
        match self {
            Want::Float32 => NEED_F32,
            Want::Integer => "wgcompute needs an integer dtype (int8 to int64 or uint8 to uint64)",
        }
    }
}

/// Reads into `buffer` until it is full or the source ends; returns how many bytes were read.
fn read_full(reader: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

/// Reads the `bytes` bytes of data, and one more to find out whether there are too many. With a known size the
/// buffer is allocated once (the file was seen to hold that much); otherwise it grows with what arrives.
fn read_data(
    reader: &mut impl Read,
    bytes: usize,
    size_known: bool,
    name: &str,
    what: &str,
) -> Result<Vec<u8>> {
    let limit = bytes.saturating_add(1);
    let mut data = Vec::new();
    let first = if size_known { limit } else { limit.min(CHUNK) };
    data.try_reserve_exact(first)
        .with_context(|| format!("cannot allocate memory for {name} ({what})"))?;
    let mut chunk = vec![0u8; CHUNK];
    while data.len() < limit {
        let want = (limit - data.len()).min(CHUNK);
        let read = match reader.read(&mut chunk[..want]) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error).with_context(|| format!("cannot read {name}")),
        };
        data.try_reserve(read)
            .with_context(|| format!("cannot allocate memory for {name} ({what})"))?;
        data.extend_from_slice(&chunk[..read]);
    }
    if data.len() < bytes {
        bail!(
            "{name} is truncated: its header gives {what}, but only {} bytes follow",
            data.len()
        );
    }
    if data.len() > bytes {
        bail!(
            "{name} has more bytes than its header describes ({what}); a .npy file holds one array"
        );
    }
    Ok(data)
}

/// What a header says, once parsed.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

#[derive(Debug, PartialEq, Eq)]
enum HeaderError {
    /// `descr` is a list (or other container): a structured dtype, refused without reading it.
    Structured,
    Malformed(String),
}

impl From<String> for HeaderError {
    fn from(why: String) -> Self {
        HeaderError::Malformed(why)
    }
}

/// Parses the dict NumPy writes, and nothing more: `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`
/// with keys and strings in single or double quotes (optionally `u`-prefixed), `True`/`False`, a tuple of
/// non-negative integers (an `L` suffix from Python 2 allowed), whitespace and trailing commas, the three keys
/// exactly once each in any order. One pass, no recursion: time is linear in the header's length.
fn parse_header(text: &str) -> Result<Header, HeaderError> {
    let mut cursor = Cursor { text, at: 0 };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    cursor.skip_space();
    cursor.expect(b'{', "to open the header's dict")?;
    loop {
        cursor.skip_space();
        if cursor.eat(b'}') {
            break;
        }
        let key = cursor.string()?;
        cursor.skip_space();
        cursor.expect(b':', "after a key")?;
        cursor.skip_space();
        let repeated = match key {
            "descr" => {
                if matches!(cursor.peek(), Some(b'[' | b'(' | b'{')) {
                    return Err(HeaderError::Structured);
                }
                descr.replace(cursor.string()?.to_string()).is_some()
            }
            "fortran_order" => fortran_order.replace(cursor.boolean()?).is_some(),
            "shape" => shape.replace(cursor.shape()?).is_some(),
            other => {
                return Err(format!(
                    "unexpected key '{}'; a .npy header holds only 'descr', 'fortran_order' and 'shape'",
                    shorten(other)
                )
                .into())
            }
        };
        if repeated {
            return Err(format!("the key '{key}' appears twice").into());
        }
        cursor.skip_space();
        if cursor.eat(b',') {
            continue;
        }
        cursor.expect(b'}', "or ',' after a value")?;
        break;
    }
    cursor.skip_space();
    if cursor.at < text.len() {
        return Err(format!("unexpected {} after the dict", cursor.found()).into());
    }
    let missing = |key: &str| HeaderError::Malformed(format!("it has no '{key}'"));
    Ok(Header {
        descr: descr.ok_or_else(|| missing("descr"))?,
        fortran_order: fortran_order.ok_or_else(|| missing("fortran_order"))?,
        shape: shape.ok_or_else(|| missing("shape"))?,
    })
}

struct Cursor<'a> {
    text: &'a str,
    /// Always on a character boundary: only ASCII bytes and whole strings are stepped over.
    at: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let matched = self.peek() == Some(byte);
        if matched {
            self.at += 1;
        }
        matched
    }

    fn skip_space(&mut self) {
        while matches!(
            self.peek(),
            Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
        ) {
            self.at += 1;
        }
    }

    /// What is at the cursor, for errors.
    fn found(&self) -> String {
        match self
            .text
            .get(self.at..)
            .and_then(|rest| rest.chars().next())
        {
            None => "the end of the header".to_string(),
            Some(next) => format!("{:?} at byte {}", next, self.at),
        }
    }

    fn expect(&mut self, byte: u8, context: &str) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' {context}, found {}",
                char::from(byte),
                self.found()
            ))
        }
    }

    /// `'text'`, `"text"`, `u'text'`: no escapes, no line breaks.
    fn string(&mut self) -> Result<&'a str, String> {
        let start = self.at;
        if matches!(self.peek(), Some(b'u' | b'U')) {
            self.at += 1;
        }
        let quote = match self.peek() {
            Some(quote @ (b'\'' | b'"')) => quote,
            _ => {
                self.at = start;
                return Err(format!("expected a quoted string, found {}", self.found()));
            }
        };
        self.at += 1;
        let body = self.at;
        loop {
            match self.peek() {
                None | Some(b'\n' | b'\r') => {
                    return Err(format!("the string at byte {start} is not closed"))
                }
                Some(b'\\') => {
                    return Err(format!(
                    "the string at byte {start} holds an escape sequence, which NumPy never writes"
                ))
                }
                Some(byte) if byte == quote => break,
                Some(_) => self.at += 1,
            }
        }
        let content = self
            .text
            .get(body..self.at)
            .ok_or_else(|| format!("the string at byte {start} is not text"))?;
        self.at += 1;
        Ok(content)
    }

    fn boolean(&mut self) -> Result<bool, String> {
        let rest = self.text.as_bytes().get(self.at..).unwrap_or_default();
        for (word, value) in [(&b"True"[..], true), (&b"False"[..], false)] {
            let follows = rest.get(word.len()).copied();
            if rest.starts_with(word)
                && !follows.is_some_and(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
            {
                self.at += word.len();
                return Ok(value);
            }
        }
        Err(format!(
            "'fortran_order' must be True or False, found {}",
            self.found()
        ))
    }

    /// `()`, `(5,)`, `(2, 3)`, `(2, 3,)`: non-negative integers that fit in u64.
    fn shape(&mut self) -> Result<Vec<u64>, String> {
        self.expect(b'(', "to open the shape (a tuple)")?;
        let mut dims = Vec::new();
        loop {
            self.skip_space();
            if self.eat(b')') {
                break;
            }
            dims.push(self.dimension()?);
            self.skip_space();
            if self.eat(b',') {
                continue;
            }
            self.expect(b')', "or ',' in the shape")?;
            if dims.len() == 1 {
                return Err(
                    "the shape '(n)' is a number, not a tuple; NumPy writes '(n,)'".to_string(),
                );
            }
            break;
        }
        Ok(dims)
    }

    fn dimension(&mut self) -> Result<u64, String> {
        let start = self.at;
        let mut value = 0u64;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)
                .and_then(|value| value.checked_add(u64::from(digit - b'0')))
                .ok_or_else(|| format!("the dimension at byte {start} is over 2^64"))?;
            self.at += 1;
        }
        if self.at == start {
            return Err(format!(
                "expected a non-negative integer in the shape, found {}",
                self.found()
            ));
        }
        // Python 2 wrote long integers as 5L; NumPy still reads them.
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.at += 1;
        }
        Ok(value)
    }
}

/// At most 40 characters of `text`, escaped, for error messages.
fn shorten(text: &str) -> String {
    let mut short: String = text.chars().take(40).flat_map(char::escape_debug).collect();
    if text.chars().count() > 40 {
        short.push('…');
    }
    short
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

/// The element types this reader decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    /// float16, float32 or float64 (by its size in bytes), read as float32 as Python's `Session.tensor` reads
    /// them: rounded to nearest, values beyond float32's range becoming ±inf as NumPy's `astype` makes them.
    Float { size: usize, order: ByteOrder },
    Int {
        signed: bool,
        size: usize,
        order: ByteOrder,
    },
}

/// A descr's parts: byte-order character (if any), kind, item size, and whatever follows (a datetime unit).
fn split_descr(descr: &str) -> Option<(Option<char>, char, usize, &str)> {
    let mut chars = descr.chars();
    let mut first = chars.next()?;
    let order = if matches!(first, '<' | '>' | '=' | '|') {
        let order = first;
        first = chars.next()?;
        Some(order)
    } else {
        None
    };
    if !first.is_ascii_alphabetic() {
        return None;
    }
    let rest = chars.as_str();
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let size = if digits == 0 {
        0
    } else {
        rest[..digits].parse().ok()?
    };
    let unit = &rest[digits..];
    // Only datetimes carry anything after the size: a unit in brackets ('<M8[ns]').
    if !unit.is_empty() && !unit.starts_with('[') {
        return None;
    }
    Some((order, first, size, unit))
}

impl Element {
    fn from_descr(descr: &str, want: Want) -> Option<Element> {
        let (order, kind, size, rest) = split_descr(descr)?;
        if !rest.is_empty() {
            return None;
        }
        let order = match order {
            Some('<') => ByteOrder::Little,
            Some('>') => ByteOrder::Big,
            // '=' is native order, '|' "not applicable"; NumPy reads both as native.
            _ if cfg!(target_endian = "big") => ByteOrder::Big,
            _ => ByteOrder::Little,
        };
        match (want, kind, size) {
            (Want::Float32, 'f', 2 | 4 | 8) => Some(Element::Float { size, order }),
            (Want::Integer, 'i' | 'u', 1 | 2 | 4 | 8) => Some(Element::Int {
                signed: kind == 'i',
                size,
                order,
            }),
            _ => None,
        }
    }

    fn size(self) -> usize {
        match self {
            Element::Float { size, .. } | Element::Int { size, .. } => size,
        }
    }

    fn name(self) -> String {
        match self {
            Element::Float { size, .. } => format!("float{}", size * 8),
            Element::Int { signed, size, .. } => {
                format!("{}int{}", if signed { "" } else { "u" }, size * 8)
            }
        }
    }

    fn decode(self, raw: &[u8], name: &str) -> Result<Values> {
        Ok(match self {
            Element::Float { size, order } => Values::F32(
                raw.chunks_exact(size)
                    .map(|bytes| {
                        let mut wide = [0u8; 8];
                        match order {
                            ByteOrder::Little => wide[..size].copy_from_slice(bytes),
                            ByteOrder::Big => wide[..size]
                                .iter_mut()
                                .zip(bytes.iter().rev())
                                .for_each(|(to, &from)| *to = from),
                        }
                        let bits = u64::from_le_bytes(wide);
                        match size {
                            2 => f16_to_f32(bits as u16),
                            4 => f32::from_bits(bits as u32),
                            // `as` rounds to nearest and gives ±inf beyond float32's range, as astype does.
                            _ => f64::from_bits(bits) as f32,
                        }
                    })
                    .collect(),
            ),
            Element::Int {
                signed,
                size,
                order,
            } => {
                let mut values = Vec::with_capacity(raw.len() / size);
                for (index, bytes) in raw.chunks_exact(size).enumerate() {
                    let mut wide = [0u8; 8];
                    match order {
                        ByteOrder::Little => wide[..size].copy_from_slice(bytes),
                        ByteOrder::Big => wide[..size]
                            .iter_mut()
                            .zip(bytes.iter().rev())
                            .for_each(|(to, &from)| *to = from),
                    }
                    // Sign-extend from the element's width.
                    let shift = 64 - 8 * size as u32;
                    let unsigned = u64::from_le_bytes(wide);
                    let value = if signed {
                        ((unsigned << shift) as i64) >> shift
                    } else {
                        i64::try_from(unsigned).map_err(|_| {
                            anyhow::anyhow!(
                                "{name} holds {unsigned} at flat index {index}, beyond int64"
                            )
                        })?
                    };
                    values.push(value);
                }
                Values::I64(values)
            }
        })
    }
}

/// An IEEE half's value as float32, exactly (every half is a float32).
fn f16_to_f32(half: u16) -> f32 {
    let sign = u32::from(half >> 15) << 31;
    let exponent = u32::from((half >> 10) & 0x1f);
    let mantissa = u32::from(half & 0x3ff);
    let bits = match (exponent, mantissa) {
        (0, 0) => sign,
        // A subnormal half: its value is mantissa · 2^-24, a normal float32.
        (0, _) => {
            let magnitude = mantissa as f32 * f32::from_bits(0x3380_0000);
            sign | magnitude.to_bits()
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (mantissa << 13),
        _ => sign | ((exponent + 127 - 15) << 23) | (mantissa << 13),
    };
    f32::from_bits(bits)
}

/// How NumPy would name a dtype: "float64 ('<f8')".
fn describe_dtype(descr: &str) -> String {
    let shown = shorten(descr);
    let Some((_, kind, size, _)) = split_descr(descr) else {
        return format!("an unknown dtype ('{shown}')");
    };
    let bits = size * 8;
    let name = match kind {
        'f' => format!("float{bits}"),
        'i' => format!("int{bits}"),
        'u' => format!("uint{bits}"),
        'c' => format!("complex{bits}"),
        'b' => "bool".to_string(),
        'S' | 'a' => "byte strings".to_string(),
        'U' => "strings".to_string(),
        'O' => "Python objects".to_string(),
        'm' => "timedelta64".to_string(),
        'M' => "datetime64".to_string(),
        'V' => "raw bytes (void)".to_string(),
        _ => "an unknown dtype".to_string(),
    };
    format!("{name} ('{shown}')")
}

/// The header NumPy would write for a C-order array: version 1.0 (2.0 if it does not fit), padded with spaces
/// and a newline so that the data starts on a 64-byte boundary.
fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims = match shape {
        [dim] => format!("({dim},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let padded = |preamble: usize| {
        let unpadded = preamble + dict.len() + 1;
        dict.len() + 1 + (64 - unpadded % 64) % 64
    };
    let mut bytes = MAGIC.to_vec();
    let length = padded(10);
    if let Ok(short) = u16::try_from(length) {
        bytes.extend_from_slice(&[1, 0]);
        bytes.extend_from_slice(&short.to_le_bytes());
    } else {
        let length = padded(12);
        bytes.extend_from_slice(&[2, 0]);
        bytes.extend_from_slice(&(length as u32).to_le_bytes());
    }
    let start = bytes.len();
    bytes.extend_from_slice(dict.as_bytes());
    let length = padded(start);
    bytes.resize(start + length - 1, b' ');
    bytes.push(b'\n');
    bytes
}

/// A type this module writes: its descr and little-endian bytes.
pub trait NpyElement: Copy {
    const DESCR: &'static str;
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
}

impl NpyElement for f32 {
    const DESCR: &'static str = "<f4";
    const SIZE: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyElement for i64 {
    const DESCR: &'static str = "<i8";
    const SIZE: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Writes a C-order .npy of `data` with `shape` to `writer`.
pub fn write<T: NpyElement>(
    writer: &mut impl Write,
    shape: &[usize],
    data: &[T],
) -> io::Result<()> {
    writer.write_all(&header_bytes(T::DESCR, shape))?;
    let mut buffer = Vec::with_capacity(CHUNK);
    for chunk in data.chunks(CHUNK / T::SIZE) {
        buffer.clear();
        chunk.iter().for_each(|&value| value.put(&mut buffer));
        writer.write_all(&buffer)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
