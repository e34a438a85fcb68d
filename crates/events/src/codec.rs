//! Little-endian encoding of record payloads. Hand-written (not serde) so the
//! probe stays dependency-free and the decoder can be fuzzed byte by byte.

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

/// Appends the payload (kind byte + fields) of `record` to `out`.
pub(crate) fn encode_payload(record: &Record, out: &mut Vec<u8>) {
    let mut o = Out(out);
    match record {
        Record::Library(r) => {
            o.u8(KIND_LIBRARY);
            o.u32(r.id);
            o.str(&r.path);
        }
        Record::Mem(r) => {
            o.u8(KIND_MEM);
            o.u64(r.t_start);
            o.u64(r.t_end);
            o.u16(r.api.code());
            o.u32(r.thread);
            o.i32(r.device);
            o.u64(r.bytes);
            o.u64(r.address);
            o.u32(r.result);
            o.u32(r.library);
            o.u64(r.free_before);
            o.u64(r.free_after);
            o.u64(r.total);
        }
        Record::Context(r) => {
            o.u8(KIND_CONTEXT);
            o.u64(r.t);
            o.i32(r.device);
            o.u32(r.context_id);
            o.str(&r.pci_bus_id);
            o.u64(r.free);
            o.u64(r.total);
        }
        Record::Module(r) => {
            o.u8(KIND_MODULE);
            o.u64(r.t);
            o.u32(r.context_id);
            o.u32(r.module_id);
            o.u64(r.cubin_bytes);
        }
        Record::LocalMemory(r) => {
            o.u8(KIND_LOCAL_MEMORY);
            o.u64(r.t_start);
            o.u64(r.t_end);
            o.u32(r.device);
            o.u32(r.context_id);
            o.u32(r.correlation_id);
            o.str(&r.kernel);
            o.u64(r.total_before);
            o.u64(r.total_after);
            o.u32(r.per_thread);
            o.u16(r.registers);
            for v in r.grid.iter().chain(r.block.iter()) {
                o.i32(*v);
            }
        }
        Record::KernelFirst(r) => {
            o.u8(KIND_KERNEL_FIRST);
            o.u64(r.t_start);
            o.u64(r.t_end);
            o.u32(r.device);
            o.u32(r.context_id);
            o.str(&r.kernel);
            o.u64(r.local_total);
        }
        Record::Marker(r) => {
            o.u8(KIND_MARKER);
            o.u64(r.t_start);
            o.u64(r.t_end);
            o.str(&r.name);
        }
        Record::Notice(r) => {
            o.u8(KIND_NOTICE);
            o.u64(r.t);
            o.u8(match r.level {
                NoticeLevel::Info => 0,
                NoticeLevel::Warning => 1,
                NoticeLevel::Disabled => 2,
            });
            o.str(&r.text);
        }
        Record::Dropped(r) => {
            o.u8(KIND_DROPPED);
            o.u64(r.t);
            o.u64(r.probe_events);
            o.u64(r.cupti_records);
        }
        Record::Cost(r) => {
            o.u8(KIND_COST);
            o.u64(r.t);
            o.u64(r.callbacks);
            o.u64(r.callback_ns);
            o.u64(r.activity_records);
            o.u64(r.activity_ns);
            o.u64(r.activity_buffer_bytes);
            o.u64(r.bytes_written);
            o.u64(r.flush_ns);
        }
        Record::Activity(r) => {
            o.u8(KIND_ACTIVITY);
            o.u64(r.t);
            o.u8(r.kernel_records as u8);
        }
        Record::Pool(r) => {
            o.u8(KIND_POOL);
            o.u64(r.t);
            o.u32(r.pool_id);
            o.i32(r.device);
            o.u64(r.handle);
            o.u32(r.library);
            o.u64(r.allocs);
            o.u64(r.alloc_bytes);
            o.u64(r.frees);
            o.u64(r.failed);
            o.u64(r.reserved);
            o.u64(r.reserved_high);
            o.u64(r.used);
        }
        Record::NvmlDevice(r) => {
            o.u8(KIND_NVML_DEVICE);
            o.u64(r.t);
            o.u32(r.gpu);
            o.u64(r.used);
            o.u64(r.total);
        }
        Record::NvmlProcess(r) => {
            o.u8(KIND_NVML_PROCESS);
            o.u64(r.t);
            o.u32(r.gpu);
            o.u32(r.pid);
            o.u64(r.used);
        }
        Record::Unknown { kind } => o.u8(*kind),
    }
}

/// Decodes one payload; `base` is the payload's file offset, for error messages.
pub(crate) fn decode_payload(payload: &[u8], base: u64) -> Result<Record, DecodeError> {
    let mut i = In::new(payload, base);
    let kind = i.u8("kind")?;
    let record = match kind {
        KIND_LIBRARY => Record::Library(LibraryName {
            id: i.u32("id")?,
            path: i.str("path")?,
        }),
        KIND_MEM => Record::Mem(MemCall {
            t_start: i.u64("t_start")?,
            t_end: i.u64("t_end")?,
            api: MemApi::from_code(i.u16("api")?),
            thread: i.u32("thread")?,
            device: i.i32("device")?,
            bytes: i.u64("bytes")?,
            address: i.u64("address")?,
            result: i.u32("result")?,
            library: i.u32("library")?,
            free_before: i.u64("free_before")?,
            free_after: i.u64("free_after")?,
            total: i.u64("total")?,
        }),
        KIND_CONTEXT => Record::Context(ContextCreated {
            t: i.u64("t")?,
            device: i.i32("device")?,
            context_id: i.u32("context_id")?,
            pci_bus_id: i.str("pci_bus_id")?,
            free: i.u64("free")?,
            total: i.u64("total")?,
        }),
        KIND_MODULE => Record::Module(ModuleLoad {
            t: i.u64("t")?,
            context_id: i.u32("context_id")?,
            module_id: i.u32("module_id")?,
            cubin_bytes: i.u64("cubin_bytes")?,
        }),
        KIND_LOCAL_MEMORY => {
            let t_start = i.u64("t_start")?;
            let t_end = i.u64("t_end")?;
            let device = i.u32("device")?;
            let context_id = i.u32("context_id")?;
            let correlation_id = i.u32("correlation_id")?;
            let kernel = i.str("kernel")?;
            let total_before = i.u64("total_before")?;
            let total_after = i.u64("total_after")?;
            let per_thread = i.u32("per_thread")?;
            let registers = i.u16("registers")?;
            let mut dims = [0i32; 6];
            for d in dims.iter_mut() {
                *d = i.i32("dims")?;
            }
            Record::LocalMemory(LocalMemoryGrowth {
                t_start,
                t_end,
                device,
                context_id,
                correlation_id,
                kernel,
                total_before,
                total_after,
                per_thread,
                registers,
                grid: [dims[0], dims[1], dims[2]],
                block: [dims[3], dims[4], dims[5]],
            })
        }
        KIND_KERNEL_FIRST => Record::KernelFirst(KernelFirstLaunch {
            t_start: i.u64("t_start")?,
            t_end: i.u64("t_end")?,
            device: i.u32("device")?,
            context_id: i.u32("context_id")?,
            kernel: i.str("kernel")?,
            local_total: i.u64("local_total")?,
        }),
        KIND_MARKER => Record::Marker(Marker {
            t_start: i.u64("t_start")?,
            t_end: i.u64("t_end")?,
            name: i.str("name")?,
        }),
        KIND_NOTICE => Record::Notice(Notice {
            t: i.u64("t")?,
            level: match i.u8("level")? {
                0 => NoticeLevel::Info,
                1 => NoticeLevel::Warning,
                _ => NoticeLevel::Disabled,
            },
            text: i.str("text")?,
        }),
        KIND_DROPPED => Record::Dropped(RecordsDropped {
            t: i.u64("t")?,
            probe_events: i.u64("probe_events")?,
            cupti_records: i.u64("cupti_records")?,
        }),
        KIND_COST => Record::Cost(ProbeCost {
            t: i.u64("t")?,
            callbacks: i.u64("callbacks")?,
            callback_ns: i.u64("callback_ns")?,
            activity_records: i.u64("activity_records")?,
            activity_ns: i.u64("activity_ns")?,
            activity_buffer_bytes: i.u64("activity_buffer_bytes")?,
            bytes_written: i.u64("bytes_written")?,
            // A trailing field: older probes' records end before it.
            flush_ns: if i.pos < i.bytes.len() {
                i.u64("flush_ns")?
            } else {
                0
            },
        }),
        KIND_ACTIVITY => Record::Activity(ActivityState {
            t: i.u64("t")?,
            kernel_records: i.u8("kernel_records")? != 0,
        }),
        KIND_POOL => Record::Pool(PoolUse {
            t: i.u64("t")?,
            pool_id: i.u32("pool_id")?,
            device: i.i32("device")?,
            handle: i.u64("handle")?,
            library: i.u32("library")?,
            allocs: i.u64("allocs")?,
            alloc_bytes: i.u64("alloc_bytes")?,
            frees: i.u64("frees")?,
            failed: i.u64("failed")?,
            reserved: i.u64("reserved")?,
            reserved_high: i.u64("reserved_high")?,
            used: i.u64("used")?,
        }),
        KIND_NVML_DEVICE => Record::NvmlDevice(NvmlDeviceSample {
            t: i.u64("t")?,
            gpu: i.u32("gpu")?,
            used: i.u64("used")?,
            total: i.u64("total")?,
        }),
        KIND_NVML_PROCESS => Record::NvmlProcess(NvmlProcessSample {
            t: i.u64("t")?,
            gpu: i.u32("gpu")?,
            pid: i.u32("pid")?,
            used: i.u64("used")?,
        }),
        other => return Ok(Record::Unknown { kind: other }),
    };
    i.finish()?;
    Ok(record)
}
