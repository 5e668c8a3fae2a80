//! Hand-written JSON for the values written most in a burst (the sim's
//! nodes, the reconciler's audit lines): the same bytes as `serde_json`'s
//! compact form, without its serializer's cost per field. Tests compare
//! every writer with `serde_json`.

use model::observed::Timestamp;
use sim::WorldNode;

/// A time as [`model::time::fast`] writes it, with its quotes.
#[derive(serde::Serialize)]
struct FastTime(#[serde(serialize_with = "model::time::fast::serialize")] Timestamp);

/// Appends `text` as a JSON string, escaped as `serde_json` escapes it
/// (`"`, `\` and control characters; nothing else).
pub fn push_str(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        let short = match b {
            b'"' => '"',
            b'\\' => '\\',
            0x08 => 'b',
            0x0c => 'f',
            b'\n' => 'n',
            b'\r' => 'r',
            b'\t' => 't',
            0x00..=0x1f => 'u',
            _ => continue,
        };
        // `i` is an ASCII byte's: a character boundary.
        out.push_str(&text[start..i]);
        out.push('\\');
        out.push(short);
        if short == 'u' {
            out.push_str("00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        start = i + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// Appends `n` in decimal (what `write!` gives, without its formatting
/// machinery; the state's compact records use it too).
pub fn push_u64(n: u64, out: &mut String) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for d in &digits[at..] {
        out.push(char::from(*d));
    }
}

/// A sim node's stored value: `serde_json::to_string(node)`.
pub fn world_node(node: &WorldNode) -> String {
    let mut out = String::with_capacity(128 + 64 * node.node.gpus.len());
    if !push_world_node(node, &mut out) {
        // A field written here by serde alone (times, GPU details).
        return serde_json::to_string(node).unwrap_or_default();
    }
    out
}

/// Appends `node` as `serde_json` writes it; `false` (with `out` partly
/// written) for a node still provisioning or with GPU details, left to
/// `serde_json`.
fn push_world_node(node: &WorldNode, out: &mut String) -> bool {
    let observed = &node.node;
    if node.ready_at.is_some() || observed.gpus.iter().any(|g| g.details.is_some()) {
        return false;
    }
    out.push_str("{\"node\":{\"name\":");
    push_str(&observed.name, out);
    if let Some(pool) = &observed.pool {
        out.push_str(",\"pool\":");
        push_str(pool, out);
    }
    if !observed.labels.is_empty() {
        out.push_str(",\"labels\":{");
        for (i, (key, value)) in observed.labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_str(key, out);
            out.push(':');
            push_str(value, out);
        }
        out.push('}');
    }
    if let Some(idle) = observed.idle_since {
        out.push_str(",\"idleSince\":");
        match serde_json::to_string(&FastTime(idle)) {
            Ok(text) => out.push_str(&text),
            Err(_) => return false,
        }
    }
    out.push_str(",\"gpus\":[");
    for (i, gpu) in observed.gpus.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"index\":");
        push_u64(u64::from(gpu.index), out);
        out.push_str(",\"model\":");
        push_str(&gpu.model, out);
        if let Some(mib) = gpu.memory_mib {
            out.push_str(",\"memoryMiB\":");
            push_u64(mib, out);
        }
        out.push_str(if gpu.healthy {
            ",\"healthy\":true"
        } else {
            ",\"healthy\":false"
        });
        let texts = [("uuid", &gpu.uuid), ("pciBusId", &gpu.pci_bus_id)];
        for (key, value) in texts {
            if let Some(value) = value {
                out.push_str(",\"");
                out.push_str(key);
                out.push_str("\":");
                push_str(value, out);
            }
        }
        if let Some(domain) = gpu.nvlink_domain {
            out.push_str(",\"nvlinkDomain\":");
            push_u64(u64::from(domain), out);
        }
        if let Some(reason) = &gpu.health_reason {
            out.push_str(",\"healthReason\":");
            push_str(reason, out);
        }
        out.push('}');
    }
    out.push_str("]},\"drained\":");
    out.push_str(if node.drained { "true}" } else { "false}" });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::observed::{ObservedGpu, ObservedNode};

    /// Every ASCII character and a few others, alone and among letters.
    fn tricky() -> Vec<String> {
        let mut texts: Vec<String> = (0u8..128).map(|b| char::from(b).to_string()).collect();
        texts.extend(
            [
                "",
                "plain",
                "a\"b\\c",
                "é ü 日本 🚀",
                "\u{7f}\u{80}\u{2028}",
                "tab\tnew\nline\r\u{1}",
            ]
            .map(String::from),
        );
        texts.push((0u8..128).map(char::from).collect());
        texts
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in tricky() {
            let mut out = String::new();
            push_str(&text, &mut out);
            assert_eq!(out, serde_json::to_string(&text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn numbers_are_written_in_decimal() {
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::new();
            push_u64(n, &mut out);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn sim_nodes_are_written_as_serde_json_writes_them() {
        let texts = tricky();
        let mut nodes = Vec::new();
        for (k, text) in texts.iter().enumerate() {
            let mut gpu = ObservedGpu::new(k as u32, text.clone());
            gpu.healthy = k % 2 == 0;
            gpu.memory_mib = (k % 3 == 0).then_some(81_920 + k as u64);
            gpu.uuid = (k % 4 == 0).then(|| format!("GPU-{text}"));
            gpu.pci_bus_id = (k % 5 == 0).then(|| text.clone());
            gpu.nvlink_domain = (k % 6 == 0).then_some(k as u32);
            gpu.health_reason = (k % 7 == 0).then(|| text.clone());
            let mut node = ObservedNode {
                name: text.clone(),
                pool: (k % 2 == 1).then(|| format!("pool {text}")),
                labels: Default::default(),
                idle_since: None,
                gpus: vec![gpu.clone(), ObservedGpu::new(0, "H100")],
            };
            if k % 3 != 0 {
                node.labels.insert("rack".into(), text.clone());
                node.labels.insert(text.clone(), "zone".into());
            }
            if k % 11 == 0 {
                node.gpus.clear();
            }
            let mut world = WorldNode::ready(node);
            world.drained = k % 2 == 0;
            nodes.push(world);
        }
        // Idle since a time (written here), provisioning (left to serde_json).
        for (k, time) in [
            "2026-11-21T10:00:00.5Z",
            "2026-11-21T10:00:00Z",
            "1970-01-01T00:00:00.000000001Z",
        ]
        .iter()
        .enumerate()
        {
            let time: model::observed::Timestamp = time.parse().unwrap();
            let mut timed = nodes[k].clone();
            timed.ready_at = Some(time);
            let mut idle = nodes[k + 3].clone();
            idle.node.idle_since = Some(time);
            let mut both = nodes[k + 6].clone();
            both.node.idle_since = Some(time);
            both.ready_at = Some(time);
            nodes.extend([timed, idle, both]);
        }
        for node in &nodes {
            assert_eq!(world_node(node), serde_json::to_string(node).unwrap());
        }
    }
}
