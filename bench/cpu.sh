#!/bin/sh
# Prints the CPU the benchmarks run on: its model name and its family,
# model and stepping, since under a hypervisor one name can stand for
# several generations ("AMD EPYC" is both a Zen 4, family 25 model 17,
# and a Zen 5, family 26 model 2, on the machines of docs/performance.md).
# Where /proc/cpuinfo has no model name (Arm), lscpu's is used.
name=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)
awk -F'\t*: *' -v lscpu_name="$name" '
$1 == "model name" && name == "" { name = $2 }
$1 == "cpu family" && family == "" { family = $2 }
$1 == "model" && model == "" { model = $2 }
$1 == "stepping" && stepping == "" { stepping = $2 }
END {
    if (name == "") name = lscpu_name
    if (name == "") name = "unknown CPU"
    if (family == "") print name
    else printf "%s (family %s, model %s, stepping %s)\n", name, family, model, stepping
}' /proc/cpuinfo
