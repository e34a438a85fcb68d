//! Little-endian encoding of record payloads. Not serde, so the probe stays
//! dependency-free and the decoder can be fuzzed byte by byte; each record's
//! field list is written once (`records!`) and both directions follow from it.

use crate::record::*;
use std::fmt;

/// Why bytes could not be decoded; `offset` is relative to the start of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: u64,
    pub what: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte offset {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for DecodeError {}

pub(crate) const KIND_LIBRARY: u8 = 1;
pub(crate) const KIND_MEM: u8 = 2;
pub(crate) const KIND_CONTEXT: u8 = 3;
pub(crate) const KIND_MODULE: u8 = 4;
pub(crate) const KIND_LOCAL_MEMORY: u8 = 5;
pub(crate) const KIND_KERNEL_FIRST: u8 = 6;
pub(crate) const KIND_MARKER: u8 = 7;
pub(crate) const KIND_NOTICE: u8 = 8;
pub(crate) const KIND_DROPPED: u8 = 9;
pub(crate) const KIND_COST: u8 = 10;
pub(crate) const KIND_ACTIVITY: u8 = 11;
pub(crate) const KIND_POOL: u8 = 12;
pub(crate) const KIND_UNTRACED: u8 = 13;
pub(crate) const KIND_NVML_DEVICE: u8 = 20;
pub(crate) const KIND_NVML_PROCESS: u8 = 21;

/// Strings longer than this are cut (kernel names can be huge C++ templates).
pub const MAX_STRING_LEN: usize = 4096;

pub(crate) struct Out<'a>(pub &'a mut Vec<u8>);

impl Out<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn str(&mut self, s: &str) {
        let mut end = s.len().min(MAX_STRING_LEN);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u32(end as u32);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
}

pub(crate) struct In<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> In<'a> {
    pub(crate) fn new(bytes: &'a [u8], base: u64) -> Self {
        In {
            bytes,
            pos: 0,
            base,
        }
    }
    fn err(&self, what: impl Into<String>) -> DecodeError {
        DecodeError {
            offset: self.base + self.pos as u64,
            what: what.into(),
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() - self.pos < n {
            return Err(self.err(format!("record ends inside field {what}")));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }
    fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }
    pub(crate) fn str(&mut self, what: &str) -> Result<String, DecodeError> {
        let len = self.u32(what)? as usize;
        if len > MAX_STRING_LEN {
            return Err(self.err(format!(
                "field {what} claims {len} bytes (max {MAX_STRING_LEN})"
            )));
        }
        let raw = self.take(len, what)?;
        Ok(String::from_utf8_lossy(raw).into_owned())
    }
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.pos != self.bytes.len() {
            // Newer writers may append fields; older readers ignore them.
            return Ok(());
        }
        Ok(())
    }
}

/// One field's wire form, written once for both directions: what `put`
/// writes, `get` reads back.
trait Wire: Sized {
    fn put(&self, o: &mut Out<'_>);
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError>;
}

macro_rules! wire_int {
    ($($ty:ident),*) => {$(
        impl Wire for $ty {
            fn put(&self, o: &mut Out<'_>) {
                o.$ty(*self)
            }
            fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
                i.$ty(what)
            }
        }
    )*};
}
wire_int!(u8, u16, u32, i32, u64);

impl Wire for String {
    fn put(&self, o: &mut Out<'_>) {
        o.str(self)
    }
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
        i.str(what)
    }
}

impl Wire for bool {
    fn put(&self, o: &mut Out<'_>) {
        o.u8(*self as u8)
    }
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
        Ok(i.u8(what)? != 0)
    }
}

/// Grid and block dimensions: three i32 each.
impl Wire for [i32; 3] {
    fn put(&self, o: &mut Out<'_>) {
        for v in self {
            o.i32(*v);
        }
    }
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
        Ok([i.i32(what)?, i.i32(what)?, i.i32(what)?])
    }
}

impl Wire for MemApi {
    fn put(&self, o: &mut Out<'_>) {
        o.u16(self.code())
    }
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
        Ok(MemApi::from_code(i.u16(what)?))
    }
}

impl Wire for NoticeLevel {
    fn put(&self, o: &mut Out<'_>) {
        o.u8(match self {
            NoticeLevel::Info => 0,
            NoticeLevel::Warning => 1,
            NoticeLevel::Disabled => 2,
        })
    }
    fn get(i: &mut In<'_>, what: &str) -> Result<Self, DecodeError> {
        Ok(match i.u8(what)? {
            0 => NoticeLevel::Info,
            1 => NoticeLevel::Warning,
            _ => NoticeLevel::Disabled,
        })
    }
}

/// Each record kind's fields, in wire order, once: the encoder and the
/// decoder are both generated from this list, so they cannot disagree.
/// `trailing` fields were appended by a later probe: an older record ends
/// before them and reads them as their default.
macro_rules! records {
    ($(
        $variant:ident($ty:ident) = $kind:ident { $($field:ident),* $(,)? }
        $(trailing { $($late:ident),* $(,)? })?;
    )*) => {
        /// Appends the payload (kind byte + fields) of `record` to `out`.
        pub(crate) fn encode_payload(record: &Record, out: &mut Vec<u8>) {
            let mut o = Out(out);
            match record {
                $(Record::$variant(r) => {
                    o.u8($kind);
                    $(r.$field.put(&mut o);)*
                    $($(r.$late.put(&mut o);)*)?
                })*
                Record::Unknown { kind } => o.u8(*kind),
            }
        }

        /// Decodes one payload; `base` is the payload's file offset, for error messages.
        pub(crate) fn decode_payload(payload: &[u8], base: u64) -> Result<Record, DecodeError> {
            let mut i = In::new(payload, base);
            let kind = i.u8("kind")?;
            let record = match kind {
                $($kind => Record::$variant($ty {
                    $($field: Wire::get(&mut i, stringify!($field))?,)*
                    $($($late: if i.pos < i.bytes.len() {
                        Wire::get(&mut i, stringify!($late))?
                    } else {
                        Default::default()
                    },)*)?
                }),)*
                other => return Ok(Record::Unknown { kind: other }),
            };
            i.finish()?;
            Ok(record)
        }
    };
}

records! {
    Library(LibraryName) = KIND_LIBRARY { id, path };
    Mem(MemCall) = KIND_MEM {
        t_start, t_end, api, thread, device, bytes, address, result, library, free_before,
        free_after, total,
    };
    Context(ContextCreated) = KIND_CONTEXT { t, device, context_id, pci_bus_id, free, total };
    Module(ModuleLoad) = KIND_MODULE { t, context_id, module_id, cubin_bytes };
    LocalMemory(LocalMemoryGrowth) = KIND_LOCAL_MEMORY {
        t_start, t_end, device, context_id, correlation_id, kernel, total_before, total_after,
        per_thread, registers, grid, block,
    };
    KernelFirst(KernelFirstLaunch) = KIND_KERNEL_FIRST {
        t_start, t_end, device, context_id, kernel, local_total,
    };
    Marker(Marker) = KIND_MARKER { t_start, t_end, name };
    Notice(Notice) = KIND_NOTICE { t, level, text };
    Dropped(RecordsDropped) = KIND_DROPPED { t, probe_events, cupti_records };
    Cost(ProbeCost) = KIND_COST {
        t, callbacks, callback_ns, activity_records, activity_ns, activity_buffer_bytes,
        bytes_written,
    } trailing { flush_ns, launch_ns, module_ns, reading_ns, walk_ns, slowest_callback_ns, slowest_callback_id };
    Activity(ActivityState) = KIND_ACTIVITY { t, kernel_records };
    Pool(PoolUse) = KIND_POOL {
        t, pool_id, device, handle, library, allocs, alloc_bytes, frees, failed, reserved,
        reserved_high, used,
    };
    Untraced(UntracedSpan) = KIND_UNTRACED { t_start, t_end, device, free_before, free_after, total };
    NvmlDevice(NvmlDeviceSample) = KIND_NVML_DEVICE { t, gpu, used, total };
    NvmlProcess(NvmlProcessSample) = KIND_NVML_PROCESS { t, gpu, pid, used };
}
