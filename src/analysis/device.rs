//! What the device says about one process's memory, over time: what the
//! process holds (NVML per process, or the device minus what was used before
//! the run), the device-wide use and the probe's own free-memory readings.
//! The replay checks its account against these; pictures draw them.

use super::names::bus_key;
use crate::load::HostData;
use crate::load::records::ProcessRecords;

/// A time series of (t, bytes), queried at or before an instant.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub points: Vec<(u64, u64)>,
}

impl Series {
    /// The last value at or before `t`.
    pub fn at(&self, t: u64) -> Option<u64> {
        let i = self.points.partition_point(|p| p.0 <= t);
        (i > 0).then(|| self.points[i - 1].1)
    }
    /// The largest value in force during [a, b].
    pub fn peak(&self, a: u64, b: u64) -> Option<u64> {
        let lo = self.points.partition_point(|p| p.0 < a);
        // A window that ends before it starts (damaged timestamps) holds nothing.
        let hi = self.points.partition_point(|p| p.0 <= b).max(lo);
        self.points[lo..hi]
            .iter()
            .map(|p| p.1)
            .chain(self.at(a))
            .max()
    }
}

/// Device memory views of one process: what the process holds (NVML per
/// process, or the device minus what was used before the run) and the
/// device-level free memory (cuMemGetInfo at probe events, NVML between).
#[derive(Debug, Clone, Default)]
pub struct DeviceView {
    pub used: Series,
    pub used_source: String,
    pub device_used: Series,
    pub cuda_total: Option<u64>,
    pub probe_free: Series,
    /// The device-wide readings (cuMemGetInfo) are this process's own: it is
    /// alone on its GPU (or there is no NVML to say otherwise).
    pub own_device: bool,
    /// The other processes on this GPU: the sum of each one's latest NVML
    /// per-process figure, at each of their samples. Their own change across
    /// an interval, read without the device-wide figure's lag behind this
    /// process's samples.
    pub others_listed: Series,
}

impl DeviceView {
    /// What other processes (and whatever the GPU held before the run) had
    /// on the device at `t`: NVML's device figure minus this process's. 0
    /// without NVML (the process's figure is then the device's).
    pub fn others_at(&self, t: u64) -> u64 {
        match (self.device_used.at(t), self.used.at(t)) {
            (Some(device), Some(own)) => device.saturating_sub(own),
            _ => 0,
        }
    }

    /// How much the other processes' own NVML figures grew from `a` to `b`
    /// (negative: they gave memory back); 0 without their samples.
    pub fn others_change(&self, a: u64, b: u64) -> i64 {
        let at = |t| self.others_listed.at(t).unwrap_or(0) as i64;
        at(b) - at(a)
    }

    /// No other process's NVML figure changed in [a, b]: a device-wide
    /// reading pair inside it holds only this process's own change (true
    /// without other processes).
    pub fn others_quiet(&self, a: u64, b: u64) -> bool {
        let points = &self.others_listed.points;
        let lo = points.partition_point(|p| p.0 < a);
        let hi = points.partition_point(|p| p.0 <= b);
        let before = self.others_listed.at(a.saturating_sub(1));
        points[lo..hi].iter().all(|p| Some(p.1) == before)
    }

    /// This process's own device memory, from a device-wide reading of free
    /// memory taken at `t` (cuMemGetInfo): the device's use minus the others'.
    pub fn own_from_free(&self, t: u64, free: u64) -> Option<u64> {
        self.cuda_total
            .map(|total| total.saturating_sub(free).saturating_sub(self.others_at(t)))
    }

    /// This process's device memory at `t` from the most recent reading: NVML
    /// (sampled, lags allocations by up to a sample) or the probe's own
    /// cuMemGetInfo (taken around every tracked call), whichever is later.
    pub fn own_used_at(&self, t: u64) -> Option<u64> {
        let nvml_i = self.used.points.partition_point(|p| p.0 <= t);
        let nvml = (nvml_i > 0).then(|| self.used.points[nvml_i - 1]);
        let probe_i = self.probe_free.points.partition_point(|p| p.0 <= t);
        let probe = (probe_i > 0).then(|| self.probe_free.points[probe_i - 1]);
        match (nvml, probe) {
            (Some(n), Some(p)) if p.0 > n.0 && !self.device_used.points.is_empty() => {
                // Others' memory as of the process's own last sample.
                let others = self.device_used.at(n.0).map(|d| d.saturating_sub(n.1));
                let own = self
                    .cuda_total
                    .zip(others)
                    .map(|(total, o)| total.saturating_sub(p.1).saturating_sub(o));
                own.or(Some(n.1))
            }
            (Some(n), _) => Some(n.1),
            (None, _) => None,
        }
    }

    /// The most this process held during [a, b]: NVML's samples in the
    /// window and the process's figure at every probe reading in it and at
    /// its end. NVML lags allocations by up to a sample, so its samples
    /// alone can peak below what the probe read inside the window (or below
    /// the window's own end figure).
    pub fn own_used_peak(&self, a: u64, b: u64) -> Option<u64> {
        let points = &self.probe_free.points;
        let lo = points.partition_point(|p| p.0 < a);
        let hi = points.partition_point(|p| p.0 <= b).max(lo);
        let at_readings = points[lo..hi].iter().filter_map(|p| self.own_used_at(p.0));
        self.used
            .peak(a, b)
            .into_iter()
            .chain(at_readings)
            .chain(self.own_used_at(b))
            .max()
    }

    /// Free device memory at `t`: the most recent of cuMemGetInfo (probe) and NVML.
    pub fn free_at(&self, t: u64) -> Option<u64> {
        let probe = self.probe_free.points[..self.probe_free.points.partition_point(|p| p.0 <= t)]
            .last()
            .copied();
        let nvml_i = self.device_used.points.partition_point(|p| p.0 <= t);
        let nvml = (nvml_i > 0).then(|| self.device_used.points[nvml_i - 1]);
        match (probe, nvml, self.cuda_total) {
            (Some(p), Some(n), Some(total)) if n.0 > p.0 => Some(total.saturating_sub(n.1)),
            (Some(p), _, _) => Some(p.1),
            (None, Some(n), Some(total)) => Some(total.saturating_sub(n.1)),
            _ => None,
        }
    }
}

/// The device views of process `pid` on the GPU at PCI `bus`, and the bytes
/// that GPU held before the run (None when the host metadata does not say).
pub fn device_view(
    host: &HostData,
    pid: u32,
    bus: Option<&str>,
    r: &ProcessRecords,
) -> (DeviceView, Option<u64>) {
    let gpu = bus.and_then(|b| {
        host.meta
            .as_ref()?
            .gpus
            .iter()
            .find(|g| bus_key(&g.pci_bus_id) == bus_key(b))
            .cloned()
    });
    let device_used = gpu
        .as_ref()
        .and_then(|g| host.nvml.devices.get(&g.index))
        .map(|s| Series {
            points: s.iter().map(|x| (x.t, x.used)).collect(),
        })
        .unwrap_or_default();
    let procs: Vec<(u64, u64)> = host
        .nvml
        .processes
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| (s.t, s.used))
        .collect();
    let others_listed = others_listed(host, gpu.as_ref().map(|g| g.index), pid);
    let baseline = gpu.as_ref().map(|g| g.used_before_bytes);
    // Every cuMemGetInfo the probe took: around each call, as each context
    // came up, and at both ends of each untraced stretch.
    let unknown = prewarm_events::UNKNOWN_BYTES;
    let mut probe_free: Vec<(u64, u64)> = r
        .mem
        .iter()
        .flat_map(|m| [(m.t_start, m.free_before), (m.t_end, m.free_after)])
        .chain(r.contexts.iter().map(|c| (c.t, c.free)))
        .chain(
            r.untraced
                .iter()
                .flat_map(|u| [(u.t_start, u.free_before), (u.t_end, u.free_after)]),
        )
        .filter(|p| p.1 != unknown)
        .collect();
    probe_free.sort();
    let cuda_total = r
        .contexts
        .iter()
        .map(|c| c.total)
        .chain(r.mem.iter().map(|m| m.total))
        .find(|t| *t != prewarm_events::UNKNOWN_BYTES);
    let alone = host
        .nvml
        .processes
        .iter()
        .filter(|s| gpu.as_ref().is_some_and(|g| g.index == s.gpu))
        .all(|s| s.pid == pid);
    let (used, used_source) = if !device_used.points.is_empty() && alone {
        // Alone on its GPU: the device-level view is the same scale as
        // cuMemGetInfo (which the probe reads) and sampled more often.
        let b = baseline.unwrap_or(0);
        (
            Series { points: device_used.points.iter().map(|p| (p.0, p.1.saturating_sub(b))).collect() },
            "NVML device used memory minus what was in use before the run (only process on its GPU)".to_string(),
        )
    } else if !procs.is_empty() {
        (
            Series { points: procs },
            "NVML per-process used memory (GPU shared with other processes)".to_string(),
        )
    } else {
        // No NVML: the device as cuMemGetInfo saw it at each allocation call.
        let pts = match cuda_total {
            Some(t) => probe_free
                .iter()
                .map(|&(at, free)| (at, t.saturating_sub(free)))
                .collect(),
            None => Vec::new(),
        };
        (
            Series { points: pts },
            "cuMemGetInfo at allocation calls (no NVML timeline)".to_string(),
        )
    };
    (
        DeviceView {
            used,
            used_source,
            device_used,
            cuda_total,
            probe_free: Series { points: probe_free },
            own_device: alone || host.nvml.processes.is_empty(),
            others_listed,
        },
        baseline,
    )
}

/// The sum of the latest NVML figure of every process on GPU `gpu` but
/// `pid`, after each of their samples (the sampler writes a process when its
/// figure changes, so the latest sample of each stands until its next).
fn others_listed(host: &HostData, gpu: Option<u32>, pid: u32) -> Series {
    let Some(gpu) = gpu else {
        return Series::default();
    };
    let mut latest = std::collections::BTreeMap::new();
    let mut points: Vec<(u64, u64)> = Vec::new();
    let mut samples: Vec<_> = host
        .nvml
        .processes
        .iter()
        .filter(|s| s.gpu == gpu && s.pid != pid)
        .collect();
    samples.sort_by_key(|s| s.t);
    for s in samples {
        latest.insert(s.pid, s.used);
        let sum = latest.values().sum();
        match points.last_mut() {
            Some(last) if last.0 == s.t => last.1 = sum,
            _ => points.push((s.t, sum)),
        }
    }
    Series { points }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_queries() {
        let s = Series {
            points: vec![(10, 1), (20, 5), (30, 2)],
        };
        assert_eq!(s.at(5), None);
        assert_eq!(s.at(25), Some(5));
        assert_eq!(s.peak(21, 29), Some(5));
        assert_eq!(s.peak(0, 35), Some(5));
        assert_eq!(s.peak(31, 40), Some(2));
    }

    /// The others' figures stand between their samples (the sampler writes a
    /// process when it changes), this process and other GPUs do not count,
    /// and a process that appears counts from its first sample.
    #[test]
    fn the_others_change_sums_each_neighbours_latest_figure() {
        use prewarm_events::NvmlProcessSample;
        let sample = |t, gpu, pid, used| NvmlProcessSample { t, gpu, pid, used };
        let host = HostData {
            dir: Default::default(),
            meta: None,
            processes: Vec::new(),
            nvml: crate::load::NvmlTimeline {
                devices: Default::default(),
                processes: vec![
                    sample(10, 0, 7, 100),
                    sample(10, 0, 8, 50),
                    sample(15, 1, 9, 1000),
                    sample(20, 0, 42, 500),
                    sample(30, 0, 7, 160),
                    sample(40, 0, 11, 5),
                ],
            },
            nccl: Vec::new(),
            problems: Vec::new(),
        };
        let listed = others_listed(&host, Some(0), 42);
        assert_eq!(listed.points, vec![(10, 150), (30, 210), (40, 215)]);
        let view = DeviceView {
            others_listed: listed,
            ..Default::default()
        };
        assert_eq!(view.others_change(12, 35), 60);
        assert_eq!(view.others_change(5, 45), 215);
        assert_eq!(view.others_change(35, 12), -60);
        assert_eq!(DeviceView::default().others_change(0, 99), 0);
    }

    #[test]
    fn free_memory_prefers_the_most_recent_view() {
        let d = DeviceView {
            device_used: Series {
                points: vec![(10, 100), (50, 300)],
            },
            cuda_total: Some(1000),
            probe_free: Series {
                points: vec![(20, 850)],
            },
            ..Default::default()
        };
        assert_eq!(d.free_at(15), Some(900));
        assert_eq!(d.free_at(30), Some(850));
        assert_eq!(d.free_at(60), Some(700));
    }

    #[test]
    fn the_peak_holds_the_probes_readings_between_nvml_samples() {
        // NVML: this process 100 of the device's 150 (others 50); the probe
        // reads 800 free at t=20 (1000 - 800 - 50 = 150 own) and 900 free
        // at t=40 (50 own); NVML's next sample, at t=50, says 60.
        let d = DeviceView {
            used: Series {
                points: vec![(10, 100), (50, 60)],
            },
            device_used: Series {
                points: vec![(10, 150), (50, 110)],
            },
            cuda_total: Some(1000),
            probe_free: Series {
                points: vec![(20, 800), (40, 900)],
            },
            ..Default::default()
        };
        assert_eq!(d.used.peak(10, 45), Some(100));
        assert_eq!(d.own_used_peak(10, 45), Some(150));
        // A window without readings: NVML's figures alone.
        assert_eq!(d.own_used_peak(50, 60), Some(60));
    }
}
