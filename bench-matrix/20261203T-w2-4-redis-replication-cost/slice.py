import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_sched_setattr = 314
def set_slice(tid, ns):
    # size, policy, flags, nice, prio, runtime, deadline, period, util_min, util_max
    attr = struct.pack("IIQiIQQQII", 56, 0, 0, 0, 0, ns, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 56)
    r = libc.syscall(SYS_sched_setattr, tid, buf, 0)
    if r != 0:
        print("tid", tid, "errno", ctypes.get_errno(), os.strerror(ctypes.get_errno()))
ns = int(sys.argv[1])
for pid in sys.argv[2:]:
    for tid in os.listdir(f"/proc/{pid}/task"):
        set_slice(int(tid), ns)
