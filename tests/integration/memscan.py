#!/usr/bin/python3
"""memscan.py PID NAME=STRING... - count copies of each STRING in PID's memory.

Reads every writable private mapping of PID (its heap, its threads'
stacks, anonymous mappings, the writable data of its libraries) through
/proc/PID/maps and /proc/PID/mem, and prints one line "NAME COUNT" for
each string, in the order given. Shared mappings (the rings, memfds) are
the clients' data, not the daemon's own memory, and are left out, as are
ASan's shadow and other mappings of more than 1 GiB (reserved, almost
never touched). Exits 77 when PID's memory cannot be read (not root, or
ptrace forbids it), 99 on a usage error.
"""
import sys

CHUNK = 1 << 24
HUGE = 1 << 30


def mappings(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            perms = parts[1]
            name = parts[5] if len(parts) > 5 else ""
            if perms[1] != "w" or perms[3] != "p":
                continue
            if hi - lo > HUGE or name in ("[vvar]", "[vsyscall]"):
                continue
            yield lo, hi


def main():
    if len(sys.argv) < 3 or not all("=" in a for a in sys.argv[2:]):
        print(__doc__.strip(), file=sys.stderr)
        return 99
    pid = int(sys.argv[1])
    needles = [a.split("=", 1) for a in sys.argv[2:]]
    needles = [(n, s.encode()) for n, s in needles]
    longest = max(len(s) for _, s in needles)
    counts = {n: 0 for n, _ in needles}
    try:
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError as e:
        print(f"memscan: /proc/{pid}/mem: {e.strerror}", file=sys.stderr)
        return 77
    scanned = 0
    with mem:
        for lo, hi in mappings(pid):
            tail = b""
            off = lo
            while off < hi:
                n = min(CHUNK, hi - off)
                try:
                    mem.seek(off)
                    buf = mem.read(n)
                except OSError:
                    break  # unmapped since, or a guard page
                if not buf:
                    break
                scanned += len(buf)
                # A copy across two chunks: in the overlap only.
                data = tail + buf
                for name, s in needles:
                    counts[name] += data.count(s)
                    if tail:
                        counts[name] -= tail.count(s)
                tail = buf[-(longest - 1):] if longest > 1 else b""
                off += len(buf)
    if not scanned:
        print(f"memscan: nothing of {pid}'s memory could be read",
              file=sys.stderr)
        return 77
    for name, _ in needles:
        print(name, counts[name])
    print(f"# {scanned} bytes scanned", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
