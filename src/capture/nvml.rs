//! The NVML sampler: device used memory of every GPU the run can use at about
//! 1 kHz, and per-process used memory at about 100 Hz, written to the host's
//! `nvml.events`. Unchanged values are written at most every 100 ms, so long
//! runs stay small without losing any change.

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;
use prewarm_events::clock::now_ns;
use prewarm_events::{NvmlDeviceSample, NvmlProcessSample, Record, encode_header, encode_record};

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::run_folder::meta::{DriverInfo, GpuInfo};

/// The device query's period unless `PREWARM_DOCTOR_NVML_PERIOD_MS` says another.
pub const DEVICE_PERIOD: Duration = Duration::from_millis(1);
const PROCESS_EVERY: u64 = 10;
const HEARTBEAT_NS: u64 = 100_000_000;

/// A running sampler; `stop` ends it and reports how many samples were taken.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicU64>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

/// Why NVML could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    #[error(
        "NVML is unavailable ({0}): no NVIDIA driver here, so nothing GPU-side can be captured"
    )]
    Unavailable(String),
    #[error("cannot write the NVML timeline {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// Opens NVML and describes the GPUs named by CUDA_VISIBLE_DEVICES (or all).
pub fn open(visible: Option<&str>) -> Result<(Nvml, Vec<GpuInfo>, DriverInfo), NvmlError> {
    let nvml = Nvml::init().map_err(|e| NvmlError::Unavailable(e.to_string()))?;
    let count = nvml
        .device_count()
        .map_err(|e| NvmlError::Unavailable(e.to_string()))?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let Ok(d) = nvml.device_by_index(index) else {
            continue;
        };
        let uuid = d.uuid().unwrap_or_default();
        if !is_visible(visible, index, &uuid) {
            continue;
        }
        let mem = d.memory_info().ok();
        gpus.push(GpuInfo {
            index,
            name: d.name().unwrap_or_default(),
            uuid,
            pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
            total_bytes: mem.as_ref().map_or(0, |m| m.total),
            used_before_bytes: mem.as_ref().map_or(0, |m| m.used),
        });
    }
    let driver = DriverInfo {
        driver_version: nvml.sys_driver_version().ok(),
        cuda_driver_version: nvml
            .sys_cuda_driver_version()
            .ok()
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        nvml_version: nvml.sys_nvml_version().ok(),
    };
    Ok((nvml, gpus, driver))
}

/// Whether NVML device `index`/`uuid` is in CUDA_VISIBLE_DEVICES.
pub fn is_visible(visible: Option<&str>, index: u32, uuid: &str) -> bool {
    let Some(list) = visible else { return true };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .any(|item| {
            item.parse::<u32>().map(|i| i == index).unwrap_or(false)
                || (item.starts_with("GPU-") && uuid.starts_with(item))
        })
}

impl Sampler {
    /// Starts sampling `gpus` into `path`, each device every `period` (the
    /// per-process list every tenth).
    pub fn start(
        nvml: Nvml,
        gpus: &[GpuInfo],
        path: &Path,
        period: Duration,
    ) -> Result<Sampler, NvmlError> {
        let file = File::create(path).map_err(|source| NvmlError::Write {
            path: path.display().to_string(),
            source,
        })?;
        let mut out = BufWriter::new(file);
        let header = encode_header(&[
            ("writer", "prewarm-doctor nvml sampler"),
            ("clock", "CLOCK_MONOTONIC"),
        ]);
        out.write_all(&header).map_err(|source| NvmlError::Write {
            path: path.display().to_string(),
            source,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(AtomicU64::new(0));
        let indices: Vec<u32> = gpus.iter().map(|g| g.index).collect();
        let thread = {
            let stop = stop.clone();
            let samples = samples.clone();
            std::thread::Builder::new()
                .name("nvml-sampler".into())
                .spawn(move || sample_loop(nvml, indices, out, stop, samples, period))
                .map_err(|source| NvmlError::Write {
                    path: "sampler thread".into(),
                    source,
                })?
        };
        Ok(Sampler {
            stop,
            samples,
            thread: Some(thread),
        })
    }

    /// Stops, flushes, and returns (samples taken, a write error if one happened).
    pub fn stop(mut self) -> (u64, Option<String>) {
        self.stop.store(true, Ordering::SeqCst);
        let err = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .and_then(|r| r.err());
        (self.samples.load(Ordering::SeqCst), err)
    }
}

fn sample_loop(
    nvml: Nvml,
    indices: Vec<u32>,
    mut out: BufWriter<File>,
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicU64>,
    period: Duration,
) -> Result<(), String> {
    let devices: Vec<_> = indices
        .iter()
        .filter_map(|&i| nvml.device_by_index(i).ok().map(|d| (i, d)))
        .collect();
    let mut last_dev: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut last_proc: HashMap<(u32, u32), (u64, u64)> = HashMap::new();
    let mut buf = Vec::with_capacity(1 << 16);
    let mut tick = 0u64;
    let mut last_flush = now_ns();
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        for (index, d) in &devices {
            let t = now_ns();
            if let Ok(m) = d.memory_info() {
                samples.fetch_add(1, Ordering::Relaxed);
                let prev = last_dev.get(index).copied();
                if stopping
                    || prev.is_none_or(|(used, at)| used != m.used || t - at >= HEARTBEAT_NS)
                {
                    last_dev.insert(*index, (m.used, t));
                    encode_record(
                        &Record::NvmlDevice(NvmlDeviceSample {
                            t,
                            gpu: *index,
                            used: m.used,
                            total: m.total,
                        }),
                        &mut buf,
                    );
                }
            }
            if (tick.is_multiple_of(PROCESS_EVERY) || stopping)
                && let Ok(procs) = d.running_compute_processes()
            {
                let t = now_ns();
                for p in procs {
                    let used = match p.used_gpu_memory {
                        UsedGpuMemory::Used(b) => b,
                        UsedGpuMemory::Unavailable => continue,
                    };
                    let key = (*index, p.pid);
                    let prev = last_proc.get(&key).copied();
                    if stopping || prev.is_none_or(|(u, at)| u != used || t - at >= HEARTBEAT_NS) {
                        last_proc.insert(key, (used, t));
                        encode_record(
                            &Record::NvmlProcess(NvmlProcessSample {
                                t,
                                gpu: *index,
                                pid: p.pid,
                                used,
                            }),
                            &mut buf,
                        );
                    }
                }
            }
        }
        tick += 1;
        let t = now_ns();
        if stopping || t - last_flush > HEARTBEAT_NS {
            out.write_all(&buf).map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            buf.clear();
            last_flush = t;
        }
        if stopping {
            return Ok(());
        }
        std::thread::sleep(period);
    }
}

/// The device query's period from `PREWARM_DOCTOR_NVML_PERIOD_MS` (whole
/// milliseconds, 1 to 1000; the footprint bench's `nvml-10ms` mode), or
/// why the value cannot be used (the default is kept).
pub fn period_from(value: Option<&str>) -> Result<Duration, String> {
    let Some(v) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(DEVICE_PERIOD);
    };
    match v.trim().parse::<u64>() {
        Ok(ms @ 1..=1000) => Ok(Duration::from_millis(ms)),
        _ => Err(format!(
            "PREWARM_DOCTOR_NVML_PERIOD_MS={v} is not a whole number of milliseconds from 1 to 1000: NVML is sampled every {} ms",
            DEVICE_PERIOD.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_follows_cuda_visible_devices() {
        assert!(is_visible(None, 3, "GPU-x"));
        assert!(is_visible(Some("1,3"), 3, "GPU-x"));
        assert!(!is_visible(Some("1,2"), 3, "GPU-x"));
        assert!(is_visible(Some("GPU-ab"), 0, "GPU-abcdef"));
        assert!(!is_visible(Some(""), 0, "GPU-abcdef"));
    }

    #[test]
    fn the_sampling_period_is_whole_milliseconds_from_1_to_1000() {
        assert_eq!(period_from(None), Ok(DEVICE_PERIOD));
        assert_eq!(period_from(Some("")), Ok(DEVICE_PERIOD));
        assert_eq!(period_from(Some("10")), Ok(Duration::from_millis(10)));
        assert_eq!(period_from(Some(" 1000 ")), Ok(Duration::from_secs(1)));
        for bad in ["0", "1001", "2.5", "-1", "fast"] {
            let why = period_from(Some(bad)).unwrap_err();
            assert!(
                why.contains(&format!("PREWARM_DOCTOR_NVML_PERIOD_MS={bad} ")),
                "{why}"
            );
            assert!(why.contains("every 1 ms"), "{why}");
        }
    }
}
