//! The .npy reader's and writer's own tests.

use super::*;
use std::time::{Duration, Instant};

fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let mut bytes = header_bytes(descr, shape);
    bytes.extend_from_slice(data);
    bytes
}

/// A file with this header text, exactly (version 1.0).
fn with_header(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&[1, 0]);
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

fn f32_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn parse_bytes(bytes: &[u8], want: Want) -> Result<(Vec<usize>, Values)> {
    parse(&mut &bytes[..], Some(bytes.len() as u64), "x.npy", want)
}

/// Parses as a stream (no known size) too, and checks both ways agree.
fn parse_both(bytes: &[u8], want: Want) -> Result<(Vec<usize>, Values)> {
    let sized = parse_bytes(bytes, want);
    let streamed = parse(&mut &bytes[..], None, "x.npy", want);
    assert_eq!(
        sized.as_ref().ok(),
        streamed.as_ref().ok(),
        "a sized and a streamed read disagree"
    );
    sized
}

fn error(bytes: &[u8]) -> String {
    match parse_both(bytes, Want::Float32) {
        Ok(parsed) => panic!("parsed {parsed:?}"),
        Err(error) => format!("{error:#}"),
    }
}

#[test]
fn written_files_read_back() {
    for shape in [&[][..], &[0], &[5], &[2, 3], &[1, 2, 3, 4]] {
        let count: usize = shape.iter().product();
        let data: Vec<f32> = (0..count).map(|i| i as f32 * 0.5 - 1.0).collect();
        let mut bytes = Vec::new();
        write(&mut bytes, shape, &data).expect("writing to memory");
        assert_eq!(
            (bytes.len() - data.len() * 4) % 64,
            0,
            "data is 64-byte aligned"
        );
        let (got_shape, values) = parse_both(&bytes, Want::Float32).expect("reads back");
        assert_eq!(got_shape, shape);
        assert_eq!(values, Values::F32(data));

        let ints: Vec<i64> = (0..count as i64).map(|i| i * -3_000_000_000).collect();
        let mut bytes = Vec::new();
        write(&mut bytes, shape, &ints).expect("writing to memory");
        assert_eq!(
            parse_both(&bytes, Want::Integer).expect("reads back"),
            (shape.to_vec(), Values::I64(ints))
        );
    }
}

#[test]
fn every_spelling_numpy_writes_or_reads_as_float32() {
    let data = f32_bytes(&[1.5, -2.0]);
    let headers = [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': 'f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': u'<f4', 'fortran_order': False, 'shape': (2,), }",
        "{u'descr': u'<f4', u'fortran_order': False, u'shape': (2L,)}",
        "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}",
        "{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}",
        "  {'descr':'<f4','fortran_order':False,'shape':(2 , ),}  \n",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
    ];
    for header in headers {
        let (shape, values) = parse_both(&with_header(header, &data), Want::Float32)
            .unwrap_or_else(|error| panic!("{header}: {error:#}"));
        assert_eq!(shape.iter().product::<usize>(), 2, "{header}");
        assert_eq!(values, Values::F32(vec![1.5, -2.0]), "{header}");
    }
    let big: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|value| value.to_be_bytes())
        .collect();
    let header = "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }";
    assert_eq!(
        parse_both(&with_header(header, &big), Want::Float32)
            .expect(">f4")
            .1,
        Values::F32(vec![1.5, -2.0])
    );
}

#[test]
fn versions_two_and_three() {
    let data = f32_bytes(&[7.0]);
    for version in [2u8, 3] {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&[version, 0]);
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&data);
        assert_eq!(
            parse_both(&bytes, Want::Float32).expect("reads"),
            (vec![], Values::F32(vec![7.0]))
        );
    }
    let mut bytes = npy("<f4", &[1], &data);
    bytes[6] = 4;
    assert!(error(&bytes).contains("version 4.0"));
}

#[test]
fn other_dtypes_are_named() {
    for (descr, named) in [
        ("<f16", "float128 ('<f16')"),
        ("<i4", "int32 ('<i4')"),
        ("|u1", "uint8 ('|u1')"),
        ("|b1", "bool ('|b1')"),
        ("<c8", "complex64 ('<c8')"),
        ("|O", "Python objects ('|O')"),
        ("<U5", "strings ('<U5')"),
        ("<M8[ns]", "datetime64 ('<M8[ns]')"),
        ("float32", "an unknown dtype"),
    ] {
        let message = error(&npy(descr, &[1], &[0; 8]));
        assert!(message.contains(named), "{descr}: {message}");
        assert!(message.contains(NEED_F32), "{descr}: {message}");
    }
    let structured =
        "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (1,), }";
    let message = error(&with_header(structured, &[0; 8]));
    assert!(message.contains("structured dtype"), "{message}");
    let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }";
    assert!(error(&with_header(fortran, &[0; 4])).contains("Fortran order"));
}

#[test]
fn integer_dtypes_widen_to_int64() {
    let cases: [(&str, Vec<u8>, Vec<i64>); 8] = [
        ("|i1", vec![0xff, 0x7f], vec![-1, 127]),
        ("|u1", vec![0xff, 0x00], vec![255, 0]),
        ("<i2", vec![0x00, 0x80, 0x01, 0x00], vec![-32768, 1]),
        (">i2", vec![0x80, 0x00, 0x00, 0x01], vec![-32768, 1]),
        ("<u2", vec![0xff, 0xff, 0x02, 0x00], vec![65535, 2]),
        (
            "<i4",
            [-5i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect(),
            vec![-5, 7],
        ),
        (
            ">u4",
            [4_000_000_000u32, 3]
                .iter()
                .flat_map(|v| v.to_be_bytes())
                .collect(),
            vec![4_000_000_000, 3],
        ),
        (
            "<u8",
            [u64::MAX / 2, 9]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            vec![i64::MAX, 9],
        ),
    ];
    for (descr, data, want) in cases {
        assert_eq!(
            parse_both(&npy(descr, &[2], &data), Want::Integer)
                .unwrap_or_else(|error| panic!("{descr}: {error:#}"))
                .1,
            Values::I64(want),
            "{descr}"
        );
    }
    let too_big: Vec<u8> = [1u64, u64::MAX]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let message = format!(
        "{:#}",
        parse_bytes(&npy("<u8", &[2], &too_big), Want::Integer).expect_err("beyond int64")
    );
    assert!(message.contains("flat index 1"), "{message}");
    let message = format!(
        "{:#}",
        parse_bytes(&npy("<f4", &[1], &[0; 4]), Want::Integer).expect_err("float32")
    );
    assert!(
        message.contains("float32 ('<f4')") && message.contains("integer"),
        "{message}"
    );
}

#[test]
fn malformed_headers_are_errors() {
    for header in [
        "",
        "{",
        "{}",
        "[]",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
        "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
    ] {
        let message = error(&with_header(header, &[0; 8]));
        assert!(
            message.starts_with("x.npy ") && !message.contains('\n'),
            "{header}: {message}"
        );
    }
}

#[test]
fn sizes_are_checked_before_anything_is_allocated() {
    let shaped = |shape: &str, data: &[u8]| {
        with_header(
            &format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"),
            data,
        )
    };
    let message = error(&shaped("(9223372036854775809, 2)", &[0; 8]));
    assert!(message.contains("2^64 elements"), "{message}");
    let message = error(&shaped("(4611686018427387904, 2)", &[0; 8]));
    assert!(message.contains("2^64 bytes"), "{message}");
    let message = error(&shaped("(1000000000000, 4)", &[0; 8]));
    assert!(
        message.contains("truncated") && message.contains("16000000000000 bytes"),
        "{message}"
    );
    let message = error(&shaped("(3,)", &[0; 8]));
    assert!(message.contains("truncated"), "{message}");
    let message = error(&shaped("(1,)", &[0; 8]));
    assert!(
        message.contains("after the data") || message.contains("more bytes"),
        "{message}"
    );
    // Empty arrays may have huge axes: no data, nothing to allocate.
    assert_eq!(
        parse_both(&shaped("(1000000000000, 0, 4)", &[]), Want::Float32).expect("empty"),
        (vec![1_000_000_000_000, 0, 4], Values::F32(vec![]))
    );
    // A header over NumPy's limit is refused from its length alone.
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&[2, 0]);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let message = error(&bytes);
    assert!(message.contains("10000 bytes"), "{message}");
}

#[test]
fn files_devices_and_directories() {
    let directory = tempfile::tempdir().expect("a scratch directory");
    let path = directory.path().join("ids.npy");
    let ids: Vec<u8> = [3i16, -1, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&path, npy("<i2", &[3], &ids)).expect("writing ids");
    let read = IntArray::read(&path).expect("int16 reads as integers");
    assert_eq!((read.shape, read.data), (vec![3], vec![3, -1, 7]));
    let message = format!(
        "{:#}",
        Array::read(&path).err().expect("int16 is not float32")
    );
    assert!(message.contains("ids.npy holds int16 ('<i2')"), "{message}");
    let message = format!(
        "{:#}",
        Array::read(directory.path()).err().expect("a directory")
    );
    assert!(message.contains("cannot read"), "{message}");
    if cfg!(unix) {
        let start = Instant::now();
        let message = format!(
            "{:#}",
            Array::read(Path::new("/dev/zero")).err().expect("zeros")
        );
        assert!(
            message.contains("/dev/zero is not a .npy file"),
            "{message}"
        );
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}

/// A source that never ends, counting what is read from it.
struct Endless {
    prefix: Vec<u8>,
    read: usize,
}

impl Read for Endless {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        for (index, byte) in buffer.iter_mut().enumerate() {
            *byte = self.prefix.get(self.read + index).copied().unwrap_or(0);
        }
        self.read += buffer.len();
        Ok(buffer.len())
    }
}

#[test]
fn endless_sources_are_read_no_further_than_the_header_says() {
    let mut zeros = Endless {
        prefix: vec![],
        read: 0,
    };
    let message = format!(
        "{:#}",
        parse(&mut zeros, None, "/dev/zero", Want::Float32).expect_err("zeros")
    );
    assert!(
        message.contains("/dev/zero is not a .npy file"),
        "{message}"
    );
    assert!(zeros.read <= 8, "read {} bytes", zeros.read);

    let prefix = npy("<f4", &[1000], &[]);
    let mut stream = Endless {
        read: 0,
        prefix: prefix.clone(),
    };
    let message = format!(
        "{:#}",
        parse(&mut stream, None, "pipe", Want::Float32).expect_err("too long")
    );
    assert!(message.contains("more bytes"), "{message}");
    assert!(
        stream.read <= prefix.len() + 4001,
        "read {} bytes",
        stream.read
    );
}

#[test]
fn nested_headers_fail_fast() {
    let start = Instant::now();
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let headers = [
        format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': {}}}",
            nested(24)
        ),
        format!(
            "{{'x': {}, 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}",
            nested(5000)
        ),
        format!(
            "{{'descr': {}, 'fortran_order': False, 'shape': (1,)}}",
            nested(12)
        ),
        format!(
            "{{'descr': [('a', {}'<f4'{})], 'fortran_order': False, 'shape': (1,)}}",
            "[('b', ".repeat(12),
            ")]".repeat(12)
        ),
        format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}1,{}}}",
            "(".repeat(24),
            ")".repeat(24)
        ),
    ];
    for header in &headers {
        let message = error(&with_header(header, &[0; 4]));
        assert!(!message.contains('\n'), "{message}");
    }
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
}

/// A small seeded generator (xorshift), so the fuzz is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// One random change to a valid file whose last `data` bytes are its data.
fn mutate(rng: &mut Rng, valid: &[u8], data: usize) -> Vec<u8> {
    let mut bytes = valid.to_vec();
    let header_end = bytes.len().min(128);
    match rng.below(7) {
        // Flip a few bytes, mostly in the header.
        0 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(header_end);
                bytes[at] ^= 1 << rng.below(8);
            }
        }
        // Overwrite a byte with one the grammar cares about.
        1 => {
            let specials = b"{}()[],:'\"uLTF0123456789 \n\\<>=|";
            let at = rng.below(header_end);
            bytes[at] = specials[rng.below(specials.len())];
        }
        // Truncate anywhere.
        2 => bytes.truncate(rng.below(bytes.len() + 1)),
        // Change the header length.
        3 => {
            let length = match rng.below(4) {
                0 => rng.below(70) as u16,
                1 => u16::MAX,
                2 => 10_001,
                _ => (rng.next() & 0xffff) as u16,
            };
            bytes[8..10].copy_from_slice(&length.to_le_bytes());
        }
        // Edit the shape to huge, zero or odd dimensions.
        4 => {
            let dims = [
                "0",
                "1",
                "3",
                "18446744073709551615",
                "18446744073709551616",
                "9223372036854775809",
                "4611686018427387904",
                "1000000000000",
            ];
            let rank = rng.below(4);
            let shape: Vec<&str> = (0..rank).map(|_| dims[rng.below(dims.len())]).collect();
            let shape = format!("({}{})", shape.join(", "), if rank == 1 { "," } else { "" });
            let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
            bytes = with_header(&header, &valid[valid.len() - data..]);
        }
        // Append or remove data bytes.
        5 => {
            if rng.below(2) == 0 {
                bytes.extend((0..rng.below(9)).map(|_| rng.next() as u8));
            } else {
                let keep = bytes.len().saturating_sub(1 + rng.below(8));
                bytes.truncate(keep);
            }
        }
        // Change the version.
        _ => {
            bytes[6] = rng.below(5) as u8;
            bytes[7] = rng.below(2) as u8;
        }
    }
    bytes
}

#[test]
fn fuzzed_files_never_panic_hang_or_overread() {
    let valid: Vec<(Vec<u8>, usize)> = [&[][..], &[3], &[2, 3], &[2, 1, 2]]
        .iter()
        .map(|shape| {
            let data: Vec<f32> = (0..shape.iter().product()).map(|i| i as f32).collect();
            let mut bytes = Vec::new();
            write(&mut bytes, shape, &data).expect("writing to memory");
            (bytes, data.len() * 4)
        })
        .collect();
    let mut rng = Rng(0x6e70_795f_6675_7a7a);
    let start = Instant::now();
    let (mut accepted, mut refused) = (0, 0);
    for case in 0..4000 {
        let (original, data) = &valid[case % valid.len()];
        let bytes = mutate(&mut rng, original, *data);
        let before = Instant::now();
        for want in [Want::Float32, Want::Integer] {
            for size in [Some(bytes.len() as u64), None] {
                match parse(&mut &bytes[..], size, "fuzz.npy", want) {
                    Ok((shape, values)) => {
                        accepted += 1;
                        let item = if want == Want::Float32 { 4 } else { 1 };
                        assert!(values.len() * item <= bytes.len(), "case {case}: {bytes:?}");
                        assert_eq!(shape.iter().product::<usize>(), values.len());
                    }
                    Err(error) => {
                        refused += 1;
                        let message = format!("{error:#}");
                        assert!(
                            message.contains("fuzz.npy") && !message.contains('\n'),
                            "case {case}: {message}"
                        );
                    }
                }
            }
        }
        // Loose enough for a busy shared machine: the bound catches a parse that hangs or grows
        // quadratically, not a slow one.
        assert!(
            before.elapsed() < Duration::from_secs(2),
            "case {case} took {:?}: {bytes:?}",
            before.elapsed()
        );
    }
    assert!(
        accepted > 100 && refused > 1000,
        "{accepted} accepted, {refused} refused"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
}

/// The floats of a file, read sized and streamed, which must agree bit for bit (NaN included).
fn floats_read(descr: &str, data: &[u8], count: usize) -> Vec<f32> {
    let bytes = npy(descr, &[count], data);
    let sized = parse_bytes(&bytes, Want::Float32).expect("reads");
    let streamed = parse(&mut &bytes[..], None, "x.npy", Want::Float32).expect("reads streamed");
    match (sized, streamed) {
        ((shape, Values::F32(values)), (streamed_shape, Values::F32(streamed_values))) => {
            assert_eq!(shape, vec![count]);
            assert_eq!(streamed_shape, shape);
            same_bits(&streamed_values, &values);
            values
        }
        other => panic!("{other:?}"),
    }
}

fn same_bits(got: &[f32], want: &[f32]) {
    let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(got), bits(want), "{got:?} against {want:?}");
}

/// float64 and float16 files are read as Python's `Session.tensor` reads such arrays: rounded to the nearest
/// float32, beyond its range ±inf (as NumPy's astype), in either byte order.
#[test]
fn float64_and_float16_are_rounded_to_float32() {
    let doubles = [
        0.1f64,
        -2.5,
        1e39,
        -1e39,
        1e-50,
        f64::INFINITY,
        f64::NAN,
        -0.0,
        16777217.0,
    ];
    let want: Vec<f32> = doubles.iter().map(|&value| value as f32).collect();
    assert!(want[2].is_infinite() && want[4] == 0.0 && want[8] == 16777216.0 && want[6].is_nan());
    let little: Vec<u8> = doubles
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect();
    same_bits(&floats_read("<f8", &little, doubles.len()), &want);
    let big: Vec<u8> = doubles
        .iter()
        .flat_map(|value| value.to_be_bytes())
        .collect();
    same_bits(&floats_read(">f8", &big, doubles.len()), &want);

    // (half bits, its value): normal, negative, the largest, the smallest subnormal, the largest subnormal,
    // ±inf, a NaN, -0 and a third.
    let halves: [(u16, f32); 10] = [
        (0x3c00, 1.0),
        (0xc000, -2.0),
        (0x7bff, 65504.0),
        (0x0001, 2f32.powi(-24)),
        (0x03ff, 1023.0 * 2f32.powi(-24)),
        (0x7c00, f32::INFINITY),
        (0xfc00, f32::NEG_INFINITY),
        (0x7e00, f32::NAN),
        (0x8000, -0.0),
        (0x3555, 0.333_251_95),
    ];
    let little: Vec<u8> = halves
        .iter()
        .flat_map(|(bits, _)| bits.to_le_bytes())
        .collect();
    let got = floats_read("<f2", &little, halves.len());
    for ((bits, value), read) in halves.iter().zip(&got) {
        if value.is_nan() {
            assert!(read.is_nan(), "{bits:#06x}: {read}");
        } else {
            assert_eq!(
                read.to_bits(),
                value.to_bits(),
                "{bits:#06x}: {read} against {value}"
            );
        }
    }
    let big: Vec<u8> = halves
        .iter()
        .flat_map(|(bits, _)| bits.to_be_bytes())
        .collect();
    let got_big = floats_read(">f2", &big, halves.len());
    assert_eq!(
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        got_big.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
}
