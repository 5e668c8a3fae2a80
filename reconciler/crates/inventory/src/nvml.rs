//! The NVML device source (nvml-wrapper).
//!
//! `libnvidia-ml.so.1` is loaded at run time (libloading), so gitfleet builds
//! and links without any NVIDIA library; on a host without the driver
//! [`NvmlSource::open`] returns [`InventoryError::NvmlMissing`].
//!
//! Every per-GPU query that fails (not supported by this GPU or driver, or any
//! other error) leaves that fact unknown; only a query that says the GPU is
//! lost marks it so. The whole read fails only when NVML cannot count GPUs.

use std::sync::atomic::{AtomicBool, Ordering};

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;

use super::{CriticalEvent, DeviceSource, EventKind, GpuFacts, InventoryError};
use model::observed::{GpuDetails, ModeState, RemappedRows};

/// NVML field ids of the row-remapping counters (nvml.h: `NVML_FI_DEV_REMAPPED_*`).
const REMAPPED_COR: u32 = 142;
const REMAPPED_UNC: u32 = 143;
const REMAPPED_PENDING: u32 = 144;
const REMAPPED_FAILURE: u32 = 145;

/// Links per GPU that NVML can report (`NVML_NVLINK_MAX_LINKS`).
const MAX_LINKS: u32 = 18;

/// How long one wait for events blocks before `stop` is checked again.
const EVENT_WAIT_MS: u32 = 1000;

/// This host's GPUs through NVML.
pub struct NvmlSource {
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NvmlSource")
    }
}

impl NvmlSource {
    /// Loads `libnvidia-ml.so.1` and initialises NVML.
    pub fn open() -> Result<Self, InventoryError> {
        Nvml::init()
            .map(|nvml| NvmlSource { nvml })
            .map_err(init_error)
    }
}

/// Library missing (or not NVML) vs. NVML refusing to start.
fn init_error(err: NvmlError) -> InventoryError {
    match err {
        NvmlError::LibloadingError(_)
        | NvmlError::FailedToLoadSymbol(_)
        | NvmlError::LibraryNotFound
        | NvmlError::FunctionNotFound => InventoryError::NvmlMissing,
        other => InventoryError::NvmlInit(other.to_string()),
    }
}

/// A query's answer, or unknown; notes when the answer was "GPU is lost".
struct Query {
    lost: bool,
}

impl Query {
    fn get<T>(&mut self, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(NvmlError::GpuLost) => {
                self.lost = true;
                None
            }
            Err(_) => None,
        }
    }
}

impl DeviceSource for NvmlSource {
    fn read(&self) -> Result<Vec<GpuFacts>, InventoryError> {
        let count = self.nvml.device_count().map_err(|e| InventoryError::Nvml {
            what: "counting GPUs",
            message: e.to_string(),
        })?;
        Ok((0..count).map(|i| self.read_gpu(i)).collect())
    }

    #[cfg(target_os = "linux")]
    fn watch_events(
        &self,
        stop: &AtomicBool,
        sink: &mut dyn FnMut(CriticalEvent),
    ) -> Result<(), InventoryError> {
        use nvml_wrapper::bitmasks::event::EventTypes;
        use nvml_wrapper::enums::event::XidError;

        let events_err =
            |what: &str, e: &dyn std::fmt::Display| InventoryError::Events(format!("{what}: {e}"));
        let wanted = EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR;
        let count = self
            .nvml
            .device_count()
            .map_err(|e| events_err("counting GPUs", &e))?;
        let mut set = self
            .nvml
            .create_event_set()
            .map_err(|e| events_err("creating an event set", &e))?;
        let mut registered = 0;
        for i in 0..count {
            let Ok(device) = self.nvml.device_by_index(i) else {
                continue;
            };
            let types = device
                .supported_event_types()
                .map(|t| t & wanted)
                .unwrap_or(EventTypes::empty());
            if types.is_empty() {
                continue;
            }
            set = device
                .register_events(types, set)
                .map_err(|e| events_err(&format!("registering GPU {i}"), &e.error))?;
            registered += 1;
        }
        if registered == 0 {
            return Err(InventoryError::Events(
                "no GPU supports critical-event notifications".to_string(),
            ));
        }
        while !stop.load(Ordering::Relaxed) {
            match set.wait(EVENT_WAIT_MS) {
                Ok(data) => {
                    let gpu = data.device.index().ok();
                    if data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
                        let xid = match data.event_data {
                            Some(XidError::Value(v)) => Some(v),
                            _ => None,
                        };
                        sink(CriticalEvent {
                            gpu,
                            kind: EventKind::Xid(xid),
                        });
                    }
                    if data.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
                        sink(CriticalEvent {
                            gpu,
                            kind: EventKind::DoubleBitEcc,
                        });
                    }
                }
                Err(NvmlError::Timeout) => {}
                Err(e) => return Err(events_err("waiting for events", &e)),
            }
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn watch_events(
        &self,
        _stop: &AtomicBool,
        _sink: &mut dyn FnMut(CriticalEvent),
    ) -> Result<(), InventoryError> {
        Err(InventoryError::Events(
            "NVML events are only available on Linux".to_string(),
        ))
    }
}

impl NvmlSource {
    /// Everything about GPU `index` that NVML will tell.
    fn read_gpu(&self, index: u32) -> GpuFacts {
        let device = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                return GpuFacts {
                    lost: matches!(e, NvmlError::GpuLost),
                    ..GpuFacts::new(index)
                };
            }
        };
        let mut q = Query { lost: false };
        let uuid = q.get(device.uuid());
        let name = q.get(device.name());
        let memory_mib = q.get(device.memory_info()).map(|m| m.total / (1024 * 1024));
        let pci_bus_id = q.get(device.pci_info()).map(|p| p.bus_id);
        let mig = q.get(device.mig_mode()).map(|m| ModeState {
            current: m.current != 0,
            pending: m.pending != 0,
        });
        let ecc = q.get(device.is_ecc_enabled()).map(|m| ModeState {
            current: m.currently_enabled,
            pending: m.pending_enabled,
        });
        let ecc_uncorrectable_volatile =
            q.get(device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile));
        let ecc_uncorrectable_aggregate =
            q.get(device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate));
        let retired_pages_pending = q.get(device.are_pages_pending_retired());
        let remapped_rows = remapped_rows(&device, &mut q);
        let (nvlink_active, nvlink_peers) = links(&device, &mut q);
        let temperature_c = q.get(device.temperature(TemperatureSensor::Gpu));
        let power_draw_w = q.get(device.power_usage()).map(milliwatts_to_watts);
        let power_limit_w = q
            .get(device.enforced_power_limit())
            .map(milliwatts_to_watts);
        let utilization = q.get(device.utilization_rates());
        GpuFacts {
            index,
            lost: q.lost,
            uuid,
            name,
            memory_mib,
            pci_bus_id,
            details: GpuDetails {
                product: None,
                mig,
                ecc,
                ecc_uncorrectable_volatile,
                ecc_uncorrectable_aggregate,
                retired_pages_pending,
                remapped_rows,
                nvlink_active,
                nvlink_peers,
                temperature_c,
                power_draw_w,
                power_limit_w,
                utilization_gpu_pct: utilization.as_ref().map(|u| u.gpu),
                utilization_memory_pct: utilization.as_ref().map(|u| u.memory),
            },
        }
    }
}

fn milliwatts_to_watts(mw: u32) -> u32 {
    (mw + 500) / 1000
}

/// Row-remapping counters through NVML field values (Ampere and newer);
/// unknown when the pending and failure flags are not both reported.
fn remapped_rows(device: &nvml_wrapper::Device<'_>, q: &mut Query) -> Option<RemappedRows> {
    let ids = [
        REMAPPED_COR,
        REMAPPED_UNC,
        REMAPPED_PENDING,
        REMAPPED_FAILURE,
    ]
    .map(FieldId);
    let samples = q.get(device.field_values_for(&ids))?;
    let mut values = [None; 4];
    for (slot, sample) in values.iter_mut().zip(samples) {
        *slot = sample.ok().and_then(|s| q.get(s.value)).map(|v| match v {
            SampleValue::U32(v) => u64::from(v),
            SampleValue::U64(v) => v,
            SampleValue::I64(v) => u64::try_from(v).unwrap_or(0),
            SampleValue::F64(v) => v.max(0.0) as u64,
        });
    }
    let [cor, unc, pending, failure] = values;
    Some(RemappedRows {
        correctable: cor.unwrap_or(0),
        uncorrectable: unc.unwrap_or(0),
        pending: pending? != 0,
        failed: failure? != 0,
    })
}

/// Active NVLink links and the PCI bus ids at their far ends; the count is
/// unknown when no link could be queried (no NVLink on this GPU).
fn links(device: &nvml_wrapper::Device<'_>, q: &mut Query) -> (Option<u32>, Vec<String>) {
    let mut answered = false;
    let mut active = 0;
    let mut peers = Vec::new();
    for link in 0..MAX_LINKS {
        let wrapper = device.link_wrapper_for(link);
        match q.get(wrapper.is_active()) {
            Some(true) => {
                answered = true;
                active += 1;
                if let Some(remote) = q.get(wrapper.remote_pci_info()) {
                    peers.push(super::nvlink::normalise_bus_id(&remote.bus_id));
                }
            }
            Some(false) => answered = true,
            None => {}
        }
    }
    peers.sort();
    peers.dedup();
    (answered.then_some(active), peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_rounds_to_watts() {
        assert_eq!(milliwatts_to_watts(699_499), 699);
        assert_eq!(milliwatts_to_watts(699_500), 700);
    }

    #[test]
    fn a_missing_library_is_nvml_missing() {
        assert!(matches!(
            init_error(NvmlError::LibraryNotFound),
            InventoryError::NvmlMissing
        ));
        assert!(matches!(
            init_error(NvmlError::DriverNotLoaded),
            InventoryError::NvmlInit(_)
        ));
    }

    /// The real NVML path: on a host without the driver (CI) it must fail
    /// with the one-line "not found" error; on a GPU host it must read.
    #[test]
    fn open_fails_cleanly_or_reads() {
        match NvmlSource::open() {
            Err(InventoryError::NvmlMissing) => {
                let text = InventoryError::NvmlMissing.to_string();
                assert!(text.contains("libnvidia-ml.so.1 not found"));
                assert!(!text.contains('\n'));
            }
            Err(InventoryError::NvmlInit(_)) => {}
            Err(other) => panic!("unexpected error: {other}"),
            Ok(source) => {
                let gpus = source.read().unwrap();
                assert!(gpus.iter().all(|g| g.uuid.is_some() || g.lost));
            }
        }
    }
}
