"""virtxml-cpu: compute the CPU features QEMU gives a libvirt guest, explain them, add kvm-pv-unhalt."""

__version__ = "0.1.0"
