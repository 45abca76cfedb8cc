"""The simulated cluster's ssh: `python -m sweepd.sim.fake_ssh --scenario S --state D NODE
COMMAND` answers the recovery primitives (`dmesg`, `rocm-smi`, `ibstat`, the ionic NIC
reset) for a simulated node, as a real node's shell would print them.

What it prints comes from the scenario: a node's `probes` entry where given, else output
made up from the node's faults (an HSA fault leaves an amdgpu reset in dmesg and a hot GPU,
a NIC fault a port down until a reset). A NIC reset is remembered in the state directory,
so the `ibstat` after it answers as the node would after the reset.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from sweepd.sim.scenario import FaultKind, ProbeSpec, Scenario, load_scenario

GPUS = 8
_STAMP = "[Tue Dec  1 03:12:4{} 2026]"
_BENIGN = ["EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode",
           "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
           "systemd[1]: Started Session 12 of user slurm."]
_FAULT_LINES = {
    FaultKind.HSA_ERROR: ["amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 "
                          "vmid:3 pasid:32771)", "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!"],
    FaultKind.ECC: ["amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in "
                    "UMC block"],
    FaultKind.NODE_CRASH: ["python3[48213]: segfault at 0 ip 00007f3a2c1d4e10 sp "
                           "00007ffd5a1c8b20 error 4 in libamdhip64.so"],
    FaultKind.NIC: ["ionic 0000:2a:00.0 ionic_3: ionic_comp_msn cqe with error"],
    FaultKind.HOST_OOM: ["Out of memory: Killed process 48213 (python3) total-vm:912345678kB"],
}
_HOT = frozenset({FaultKind.HSA_ERROR, FaultKind.ECC})


def _faults(scenario: Scenario, node: str) -> set[FaultKind]:
    return {f.kind for f in scenario.faults if f.node == node}


def dmesg(scenario: Scenario, node: str) -> str:
    lines = _BENIGN + [line for k in sorted(_faults(scenario, node)) for line in
                       _FAULT_LINES.get(k, [])]
    return "".join(f"{_STAMP.format(i % 10)} {line}\n" for i, line in enumerate(lines))


def rocm_smi(scenario: Scenario, node: str) -> str:
    hot = bool(_faults(scenario, node) & _HOT)
    ecc = FaultKind.ECC in _faults(scenario, node)
    rule = "=" * 24
    out = [f"{rule} ROCm System Management Interface {rule}", f"{rule} Temperature {rule}"]
    for g in range(GPUS):
        junction = 97.0 if hot and g == 3 else 45.0 + g % 3
        out += [f"GPU[{g}]\t\t: Temperature (Sensor edge) (C): {junction - 7:.1f}",
                f"GPU[{g}]\t\t: Temperature (Sensor junction) (C): {junction:.1f}",
                f"GPU[{g}]\t\t: Temperature (Sensor memory) (C): {junction - 4:.1f}"]
    out += [f"{rule} XGMI Error count {rule}"]
    out += [f"GPU[{g}]\t\t: XGMI Error count: {12 if ecc and g == 3 else 0}" for g in range(GPUS)]
    return "\n".join(out) + "\n"


def ibstat(scenario: Scenario, node: str, down: bool) -> str:
    out = []
    for i in range(GPUS):
        state = "Down" if down and i == 3 else "Active"
        out += [f"CA 'ionic_{i}'", "\tCA type: ", "\tNumber of ports: 1", "\tPort 1:",
                f"\t\tState: {state}", "\t\tPhysical state: "
                + ("LinkUp" if state == "Active" else "Disabled"), "\t\tRate: 400"]
    return "\n".join(out) + "\n"


def answer(scenario: Scenario, state: Path, node: str, command: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `command` on `node`."""
    if node not in scenario.cluster.node_list:
        return 255, "", f"ssh: Could not resolve hostname {node}: Name or service not known"
    spec = scenario.probes.get(node, ProbeSpec())
    if spec.delay_s:
        time.sleep(spec.delay_s)
    if spec.unreachable:
        return 255, "", f"ssh: connect to host {node} port 22: No route to host"
    reset_mark = state / f"nic-reset-{node}"
    if "rmmod" in command:
        state.mkdir(parents=True, exist_ok=True)
        reset_mark.write_text(command)
        return 0, "", ""
    if "ibstat" in command:
        if reset_mark.exists() and spec.nic_recovers:
            return 0, ibstat(scenario, node, down=False), ""
        return 0, spec.ibstat or ibstat(scenario, node,
                                        down=FaultKind.NIC in _faults(scenario, node)), ""
    if "dmesg" in command:
        return 0, spec.dmesg if spec.dmesg is not None else dmesg(scenario, node), ""
    if "rocm-smi" in command:
        return 0, spec.rocm_smi if spec.rocm_smi is not None else rocm_smi(scenario, node), ""
    return 127, "", f"bash: {command.split()[0] if command.split() else command}: command not found"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fake_ssh", description=__doc__)
    p.add_argument("--scenario", type=Path, required=True)
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("node")
    p.add_argument("command")
    args = p.parse_args(argv)
    rc, out, err = answer(load_scenario(args.scenario), args.state, args.node, args.command)
    sys.stdout.write(out)
    sys.stderr.write(err + ("\n" if err else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main())
