"""The CPU a figure was measured on, for every benchmark record. Its name alone does not say
which machine it was: these VMs call a Zen 3, a Zen 4 and a Zen 5 each `AMD EPYC`, and their
kernels differ by up to 2.5x, so the CPUID family and model go with it."""
import os

# The instruction sets orzo's kernel levels choose by (kernels/cpu/isa.cpp).
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512vbmi",
         "amx_tile", "amx_bf16", "amx_int8")


def cpu_record():
    """{model, family, model_number, cores, flags: {flag: bool}} from /proc/cpuinfo."""
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break  # the first processor tells
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    number = lambda key: int(fields[key]) if fields.get(key, "").isdigit() else None  # noqa: E731
    return {"model": fields.get("model name", "?"), "family": number("cpu family"), "model_number": number("model"),
            "cores": os.cpu_count(), "flags": {f: f in flags for f in FLAGS}}


def describe(cpu):
    """A record of cpu_record() in one line: `AMD EPYC (family 25 model 17), 2 cores: avx2 ...`."""
    ids = f" (family {cpu['family']} model {cpu['model_number']})" if cpu.get("family") is not None else ""
    flags = " ".join(f for f, on in cpu["flags"].items() if on) or "none of " + " ".join(FLAGS)
    return f"{cpu['model']}{ids}, {cpu['cores']} cores: {flags}"


def cpu_model():
    return describe(cpu_record())
