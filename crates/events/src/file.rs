//! File framing: header, length-prefixed checksummed records, and a reader that
//! tolerates a truncated tail (a rank that crashed mid-write).

use crate::codec::{DecodeError, In, Out, decode_payload, encode_payload};
use crate::record::Record;
use std::io::Read;

/// First eight bytes of every event file.
pub const MAGIC: [u8; 8] = *b"PWDOCEV\0";
/// Bumped only for incompatible layout changes; new record kinds and appended
/// fields do not need a bump (readers skip what they do not know).
pub const FORMAT_VERSION: u16 = 1;
/// A record longer than this is treated as corruption, not allocated.
pub const MAX_RECORD_LEN: u32 = 1 << 20;
const MAX_HEADER_LEN: u32 = 1 << 20;

/// The header: who wrote the file (key/value metadata such as pid, rank, host,
/// CUPTI version, clock offsets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileHeader {
    pub version: u16,
    pub fields: Vec<(String, String)>,
}

impl FileHeader {
    /// The value of a metadata key, if the writer set it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Encodes the file header for the given metadata.
pub fn encode_header(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut payload = Vec::new();
    {
        let mut o = Out(&mut payload);
        o.str_count(fields.len() as u32);
        for (k, v) in fields {
            o.str(k);
            o.str(v);
        }
    }
    let mut out = Vec::with_capacity(payload.len() + 20);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

impl Out<'_> {
    fn str_count(&mut self, n: u32) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }
}

/// Appends one framed record (length, checksum, payload) to `out`.
pub fn encode_record(record: &Record, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0u8; 8]);
    encode_payload(record, out);
    let len = (out.len() - start - 8) as u32;
    let crc = crc32fast::hash(&out[start + 8..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// How a file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Ended exactly after a complete record.
    Clean,
    /// The writer stopped mid-record (crash, kill, disk full): everything before
    /// `offset` was read; `bytes` trailing bytes were ignored.
    Truncated { offset: u64, bytes: u64 },
}

/// Streams records from any reader, one at a time, so large runs are analysed
/// without holding every record in memory.
pub struct Reader<R: Read> {
    inner: R,
    offset: u64,
    header: FileHeader,
    tail: Option<Tail>,
    payload: Vec<u8>,
    /// Records of kinds this reader does not know (from a newer probe).
    pub unknown_records: u64,
}

fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn io_err(offset: u64, e: std::io::Error) -> DecodeError {
    DecodeError {
        offset,
        what: format!("read failed: {e}"),
    }
}

impl<R: Read> Reader<R> {
    /// Reads and checks the header. Fails on foreign files, unsupported versions
    /// and damaged headers.
    pub fn new(mut inner: R) -> Result<Self, DecodeError> {
        let mut fixed = [0u8; 20];
        let n = read_up_to(&mut inner, &mut fixed).map_err(|e| io_err(0, e))?;
        if n < 8 || fixed[..8] != MAGIC {
            return Err(DecodeError {
                offset: 0,
                what: "not a prewarm-doctor event file (bad magic bytes)".into(),
            });
        }
        if n < 20 {
            return Err(DecodeError {
                offset: n as u64,
                what: "file ends inside the header".into(),
            });
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version != FORMAT_VERSION {
            return Err(DecodeError {
                offset: 8,
                what: format!(
                    "event format version {version} is not supported by this build (expects {FORMAT_VERSION}); use the prewarm-doctor that recorded it"
                ),
            });
        }
        let len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(fixed[16..20].try_into().expect("4 bytes"));
        if len > MAX_HEADER_LEN {
            return Err(DecodeError {
                offset: 12,
                what: format!("header length {len} is implausible"),
            });
        }
        let mut payload = vec![0u8; len as usize];
        let got = read_up_to(&mut inner, &mut payload).map_err(|e| io_err(20, e))?;
        if got < payload.len() {
            return Err(DecodeError {
                offset: 20 + got as u64,
                what: "file ends inside the header".into(),
            });
        }
        if crc32fast::hash(&payload) != crc {
            return Err(DecodeError {
                offset: 20,
                what: "header checksum mismatch".into(),
            });
        }
        let mut i = In::new(&payload, 20);
        let count = i.u32("field count")?;
        let mut fields = Vec::new();
        for _ in 0..count.min(10_000) {
            let k = i.str("header key")?;
            let v = i.str("header value")?;
            fields.push((k, v));
        }
        Ok(Reader {
            inner,
            offset: 20 + len as u64,
            header: FileHeader { version, fields },
            tail: None,
            payload: Vec::new(),
            unknown_records: 0,
        })
    }

    /// The file's metadata.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// How the file ended; `None` until the last record has been read.
    pub fn tail(&self) -> Option<Tail> {
        self.tail
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next record, `Ok(None)` at the end (clean or truncated: see [`Reader::tail`]),
    /// or an error naming the offset of a corrupt record.
    pub fn next_record(&mut self) -> Result<Option<Record>, DecodeError> {
        loop {
            if self.tail.is_some() {
                return Ok(None);
            }
            let mut prefix = [0u8; 8];
            let n = read_up_to(&mut self.inner, &mut prefix).map_err(|e| io_err(self.offset, e))?;
            if n == 0 {
                self.tail = Some(Tail::Clean);
                return Ok(None);
            }
            if n < 8 {
                self.tail = Some(Tail::Truncated {
                    offset: self.offset,
                    bytes: n as u64,
                });
                return Ok(None);
            }
            let len = u32::from_le_bytes(prefix[..4].try_into().expect("4 bytes"));
            let crc = u32::from_le_bytes(prefix[4..].try_into().expect("4 bytes"));
            if len == 0 || len > MAX_RECORD_LEN {
                return Err(DecodeError {
                    offset: self.offset,
                    what: format!(
                        "record length {len} is out of range (1..={MAX_RECORD_LEN}): the file is corrupt here"
                    ),
                });
            }
            self.payload.resize(len as usize, 0);
            let got = read_up_to(&mut self.inner, &mut self.payload)
                .map_err(|e| io_err(self.offset, e))?;
            if got < len as usize {
                self.tail = Some(Tail::Truncated {
                    offset: self.offset,
                    bytes: 8 + got as u64,
                });
                return Ok(None);
            }
            if crc32fast::hash(&self.payload) != crc {
                return Err(DecodeError {
                    offset: self.offset,
                    what: "record checksum mismatch: the file is corrupt here".into(),
                });
            }
            let record = decode_payload(&self.payload, self.offset + 8)?;
            self.offset += 8 + len as u64;
            if let Record::Unknown { .. } = record {
                self.unknown_records += 1;
                continue;
            }
            return Ok(Some(record));
        }
    }
}

/// Everything in one file, for tests and small files.
#[derive(Debug, Clone)]
pub struct ReadOutcome {
    pub header: FileHeader,
    pub records: Vec<Record>,
    pub tail: Tail,
    pub unknown_records: u64,
}

/// Decodes a whole file held in memory.
pub fn read_file_bytes(bytes: &[u8]) -> Result<ReadOutcome, DecodeError> {
    let mut reader = Reader::new(bytes)?;
    let mut records = Vec::new();
    while let Some(r) = reader.next_record()? {
        records.push(r);
    }
    Ok(ReadOutcome {
        header: reader.header().clone(),
        records,
        tail: reader.tail().unwrap_or(Tail::Clean),
        unknown_records: reader.unknown_records,
    })
}
