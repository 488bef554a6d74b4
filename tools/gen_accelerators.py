"""One-off generator (the `generation:` lines were added by hand afterwards): shared/data/hardware.csv -> src/tierwise/specs/catalog/accelerators.yaml (kept for provenance)."""
import csv
import sys

NAMES = {
    "a100_sxm_80gb": "a100-sxm-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_hgx": "b200",
    "gb200_nvl72": "gb200", "gb300_nvl72": "gb300", "mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x",
    "tpu_v4": "tpu-v4", "tpu_v5p": "tpu-v5p", "tpu_v6e": "tpu-v6e", "gaudi3": "gaudi3", "trainium2": "trainium2",
}
TOPO = {"switched": "switched", "torus": "torus", "mesh": "mesh", "direct": "mesh"}


def topo(text):
    t = text.lower()
    for key, val in TOPO.items():
        if key in t:
            return val
    return "switched"


def q(s):
    s = str(s).replace('"', "'")
    return f'"{s}"'


out = ["# Accelerators. Generated from shared/data/hardware.csv by tools/gen_accelerators.py, then extended by hand",
       "# (a100-sxm-40gb, h800, b300). Conventions: peak_dense_tflops is DENSE (no 2:4 sparsity); scale-up",
       "# bandwidth_one_way is per accelerator per direction; HBM capacities written 'GB' by vendors are binary",
       "# (GiB) for DRAM (hardware-notes.md section 1). Source ids S1..S42 are listed in hardware-notes.md section 5,",
       "# shipped as src/tierwise/data/hardware-notes.md.", ""]
for row in csv.DictReader(open(sys.argv[1])):  # noqa: SIM115 (one-off script)
    name = NAMES[row["id"]]
    peaks = {k: row[f"{k}_dense_tflops"] for k in ("bf16", "fp8", "fp4") if row[f"{k}_dense_tflops"]}
    hbm = row["hbm_gb"]
    hbm_str = "96 GiB" if name == "trainium2" else f"{hbm} GiB"
    out.append(f"{name}:")
    out.append(f"  display_name: {q(row['accelerator'])}")
    out.append(f"  vendor: {row['vendor']}")
    out.append("  peak_dense_tflops: {" + ", ".join(f"{k}: {v}" for k, v in peaks.items()) + "}")
    out.append(f"  hbm_capacity: {q(hbm_str)}")
    out.append(f"  hbm_type: {row['hbm_type']}")
    out.append(f"  hbm_bandwidth: \"{row['hbm_bw_tbps']} TB/s\"")
    out.append("  scale_up:")
    out.append(f"    fabric: {q(row['scaleup_fabric'])}")
    out.append(f"    bandwidth_bidirectional: \"{row['scaleup_bw_per_accel_gbytes_bidir']} GB/s\"")
    out.append(f"    bandwidth_one_way: \"{row['scaleup_bw_per_accel_gbytes_unidir']} GB/s\"")
    out.append(f"    p2p_one_way: \"{row['scaleup_p2p_gbytes_unidir']} GB/s\"")
    out.append(f"    topology: {topo(row['scaleup_topology'])}")
    out.append(f"    domain_size: {row['scaleup_domain_size']}")
    out.append(f"    domain_max: {row['scaleup_domain_max']}")
    if row["host_link_gbytes_unidir"]:
        out.append("  host_link:")
        out.append(f"    name: {q(row['host_link'])}")
        out.append(f"    bandwidth_one_way: \"{row['host_link_gbytes_unidir']} GB/s\"")
    if row["scaleout_gbps_per_accel"]:
        out.append("  scale_out:")
        out.append(f"    bandwidth_per_accelerator: \"{row['scaleout_gbps_per_accel']} Gb/s\"")
        out.append(f"    nic: {q(row['nic_model_typical'])}")
    if row["power_w"]:
        out.append(f"  power_w: {row['power_w']}")
        out.append(f"  power_term: {q(row['power_term'])}")
    out.append(f"  confidence: {row['confidence']}")
    out.append(f"  source: \"hardware.csv row {row['id']}; sources {row['source_ids']} (hardware-notes.md section 5)\"")
    notes = "; ".join(x for x in (row["compute_notes"], row["notes"]) if x)
    out.append(f"  notes: {q(notes)}")
    out.append("")
print("\n".join(out))
