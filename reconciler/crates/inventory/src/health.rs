//! The health verdict of one GPU, with its reason.
//!
//! A GPU is unhealthy (never given out; its node is drained) when:
//! 1. NVML says it is lost (fell off the bus);
//! 2. a row remap failed (the GPU needs replacing);
//! 3. it has uncorrectable ECC errors since the driver loaded (volatile count);
//! 4. memory pages wait for retirement, or a row remap waits for a reset;
//! 5. while watching, a critical XID other than the application-caused ones
//!    (13, 31, 43, 45, 68), or a double-bit ECC event, was seen on it;
//! 6. it is missing: fewer GPUs were found than the node should have.
//!
//! Lifetime (aggregate) uncorrectable counts alone do not make a GPU
//! unhealthy: retirement or remapping has dealt with them. Facts NVML could
//! not report count as fine. Reasons are listed in the order above, joined by
//! `; `.

use super::{CriticalEvent, EventKind, GpuFacts};
use model::observed::ObservedGpu;

/// Healthy or not, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// False when any rule fails.
    pub healthy: bool,
    /// Every failed rule, in words; `None` when healthy.
    pub reason: Option<String>,
}

/// XIDs that an application causes (bad kernel, page fault, reset channel)
/// and that say nothing about the GPU's hardware.
const APPLICATION_XIDS: &[u64] = &[13, 31, 43, 45, 68];

/// What a well-known XID means, from NVIDIA's XID catalogue.
pub fn xid_meaning(xid: u64) -> Option<&'static str> {
    Some(match xid {
        13 => "graphics engine exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing",
        45 => "preemptive cleanup after earlier errors",
        48 => "double-bit ECC error",
        61 => "internal micro-controller breakpoint",
        62 => "internal micro-controller halt",
        63 => "ECC page retirement or row remap recorded",
        64 => "ECC page retirement or row remap recording failed",
        68 => "video processor exception",
        74 => "NVLink error",
        79 => "GPU has fallen off the bus",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error",
        95 => "uncontained ECC error",
        119 => "GSP RPC timeout",
        120 => "GSP error",
        140 => "unrecovered ECC error",
        _ => return None,
    })
}

/// Whether an event makes its GPU unhealthy (rule 5).
pub fn is_critical(kind: EventKind) -> bool {
    match kind {
        EventKind::DoubleBitEcc => true,
        EventKind::Xid(Some(xid)) => !APPLICATION_XIDS.contains(&xid),
        EventKind::Xid(None) => true,
    }
}

/// Describes an event: `XID 79 (GPU has fallen off the bus)`.
pub fn describe_event(kind: EventKind) -> String {
    match kind {
        EventKind::DoubleBitEcc => "double-bit ECC error event".to_string(),
        EventKind::Xid(Some(xid)) => match xid_meaning(xid) {
            Some(text) => format!("XID {xid} ({text})"),
            None => format!("XID {xid}"),
        },
        EventKind::Xid(None) => "XID of unknown value".to_string(),
    }
}

/// The verdict for one GPU, given the events seen on it while watching.
pub fn assess(gpu: &GpuFacts, events: &[CriticalEvent]) -> Verdict {
    let d = &gpu.details;
    let mut reasons: Vec<String> = Vec::new();
    if gpu.lost {
        reasons.push("GPU is lost (fell off the bus)".to_string());
    }
    if d.remapped_rows.is_some_and(|r| r.failed) {
        reasons.push("row remapping failed: replace the GPU".to_string());
    }
    if let Some(n) = d.ecc_uncorrectable_volatile.filter(|n| *n > 0) {
        reasons.push(format!(
            "{n} uncorrectable ECC error{} since the driver loaded",
            if n == 1 { "" } else { "s" }
        ));
    }
    if d.retired_pages_pending == Some(true) {
        reasons.push("memory pages pending retirement: reset the GPU".to_string());
    }
    if d.remapped_rows.is_some_and(|r| r.pending && !r.failed) {
        reasons.push("row remap pending: reset the GPU".to_string());
    }
    let mut seen: Vec<String> = Vec::new();
    for e in events
        .iter()
        .filter(|e| e.gpu == Some(gpu.index) && is_critical(e.kind))
    {
        let text = describe_event(e.kind);
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    reasons.extend(seen);
    Verdict {
        healthy: reasons.is_empty(),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

/// Placeholders for GPUs a node should have but NVML did not find (rule 6):
/// unhealthy, at the lowest indices not in use, of `model`.
pub fn missing_gpus(found: &[ObservedGpu], expected: u32, model: &str) -> Vec<ObservedGpu> {
    let have = found.len() as u32;
    if have >= expected {
        return Vec::new();
    }
    let reason = format!(
        "missing: NVML found {have} of the {expected} GPUs this node should have \
         (fallen off the bus, or not detected at boot)"
    );
    let used: std::collections::BTreeSet<u32> = found.iter().map(|g| g.index).collect();
    (0..)
        .filter(|i| !used.contains(i))
        .take((expected - have) as usize)
        .map(|index| ObservedGpu {
            healthy: false,
            health_reason: Some(reason.clone()),
            ..ObservedGpu::new(index, model)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::RemappedRows;

    fn gpu() -> GpuFacts {
        GpuFacts::new(0)
    }

    #[test]
    fn a_gpu_with_unknown_facts_is_healthy() {
        assert_eq!(
            assess(&gpu(), &[]),
            Verdict {
                healthy: true,
                reason: None
            }
        );
    }

    #[test]
    fn lost_gpu_is_unhealthy() {
        let g = GpuFacts {
            lost: true,
            ..gpu()
        };
        let v = assess(&g, &[]);
        assert!(!v.healthy);
        assert_eq!(v.reason.as_deref(), Some("GPU is lost (fell off the bus)"));
    }

    #[test]
    fn volatile_uncorrectable_ecc_is_unhealthy_aggregate_alone_is_not() {
        let mut g = gpu();
        g.details.ecc_uncorrectable_aggregate = Some(3);
        g.details.ecc_uncorrectable_volatile = Some(0);
        assert!(assess(&g, &[]).healthy);
        g.details.ecc_uncorrectable_volatile = Some(2);
        let v = assess(&g, &[]);
        assert!(!v.healthy);
        assert_eq!(
            v.reason.as_deref(),
            Some("2 uncorrectable ECC errors since the driver loaded")
        );
    }

    #[test]
    fn pending_retirement_is_unhealthy() {
        let mut g = gpu();
        g.details.retired_pages_pending = Some(false);
        assert!(assess(&g, &[]).healthy);
        g.details.retired_pages_pending = Some(true);
        let v = assess(&g, &[]);
        assert_eq!(
            v.reason.as_deref(),
            Some("memory pages pending retirement: reset the GPU")
        );
    }

    #[test]
    fn row_remap_failure_and_pending() {
        let mut g = gpu();
        g.details.remapped_rows = Some(RemappedRows {
            correctable: 4,
            uncorrectable: 1,
            pending: false,
            failed: false,
        });
        assert!(assess(&g, &[]).healthy, "remapped rows alone are fine");
        g.details.remapped_rows = Some(RemappedRows {
            pending: true,
            ..Default::default()
        });
        assert_eq!(
            assess(&g, &[]).reason.as_deref(),
            Some("row remap pending: reset the GPU")
        );
        g.details.remapped_rows = Some(RemappedRows {
            pending: true,
            failed: true,
            ..Default::default()
        });
        assert_eq!(
            assess(&g, &[]).reason.as_deref(),
            Some("row remapping failed: replace the GPU")
        );
    }

    #[test]
    fn critical_xids_make_the_gpu_unhealthy_application_xids_do_not() {
        let ev = |gpu, kind| CriticalEvent {
            gpu: Some(gpu),
            kind,
        };
        let events = [
            ev(0, EventKind::Xid(Some(31))),
            ev(1, EventKind::Xid(Some(79))),
        ];
        assert!(
            assess(&gpu(), &events).healthy,
            "XID 31 is the application's"
        );
        let events = [
            ev(0, EventKind::Xid(Some(79))),
            ev(0, EventKind::Xid(Some(79))),
            ev(0, EventKind::DoubleBitEcc),
        ];
        let v = assess(&gpu(), &events);
        assert!(!v.healthy);
        assert_eq!(
            v.reason.as_deref(),
            Some("XID 79 (GPU has fallen off the bus); double-bit ECC error event")
        );
        assert!(is_critical(EventKind::Xid(None)));
        assert_eq!(describe_event(EventKind::Xid(Some(1000))), "XID 1000");
    }

    #[test]
    fn reasons_are_joined_in_rule_order() {
        let mut g = GpuFacts {
            lost: true,
            ..gpu()
        };
        g.details.ecc_uncorrectable_volatile = Some(1);
        assert_eq!(
            assess(&g, &[]).reason.as_deref(),
            Some(
                "GPU is lost (fell off the bus); 1 uncorrectable ECC error since the driver loaded"
            )
        );
    }

    #[test]
    fn missing_gpus_become_unhealthy_placeholders() {
        let found: Vec<ObservedGpu> = [0, 1, 3]
            .iter()
            .map(|i| ObservedGpu::new(*i, "H100-SXM-80GB"))
            .collect();
        let missing = missing_gpus(&found, 5, "H100-SXM-80GB");
        assert_eq!(
            missing.iter().map(|g| g.index).collect::<Vec<_>>(),
            vec![2, 4]
        );
        assert!(missing.iter().all(|g| !g.healthy));
        assert!(
            missing[0]
                .health_reason
                .as_deref()
                .unwrap()
                .starts_with("missing: NVML found 3 of the 5 GPUs")
        );
        assert!(missing_gpus(&found, 3, "H100-SXM-80GB").is_empty());
    }
}
