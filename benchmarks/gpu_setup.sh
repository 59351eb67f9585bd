# Sourced on the GPU machine from the project root, in place of .gpu/setup.sh (which it then sources):
#
#     source benchmarks/gpu_setup.sh && bash benchmarks/gpu_checks.sh cuda demos
#
# The bundle's zlib1g-dev .deb is Debian's: its libz.so link points at a libz.so.1.2.13 the machine's Ubuntu
# lacks, so the linker took its non-PIC libz.a and failed to link rlfast._C (seen on the H100 machine,
# 2026-11-26). Its headers are kept; the link goes to the libz.so.1 the machine has, and libz.a goes.
for f in .gpu/debs/zlib1g-dev*.deb; do [ -f "$f" ] && dpkg -x "$f" / && rm -f "$f"; done
rm -f /usr/lib/x86_64-linux-gnu/libz.a
_z=$(ldconfig -p | awk '/libz\.so\.1 /{print $NF; exit}')
[ -n "$_z" ] && ln -sf "$_z" /usr/lib/x86_64-linux-gnu/libz.so
unset _z
source .gpu/setup.sh
