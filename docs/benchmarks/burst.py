import socket, os, sys, time, subprocess, resource
h=resource.getrlimit(resource.RLIMIT_NOFILE)[1]; resource.setrlimit(resource.RLIMIT_NOFILE, (h, h))
state = sys.argv[1]; pid = int(sys.argv[2]); port = int(sys.argv[3])
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])//1024
def fds(): return len(os.listdir(f"/proc/{pid}/fd"))
def settle():
    # wait until the host's fd count stops moving (the host closed what it had)
    last=-1
    for _ in range(100):
        n=fds()
        if n==last: return
        last=n; time.sleep(0.2)
print("idle: rss %d MB, fds %d" % (rss(), fds()))
for name, n, connect in [("control", 19000, lambda: s_unix()), ("push (idle)", 19000, lambda: s_tcp()), ("push (preface only)", 5000, lambda: s_tcp(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))]:
    def s_unix():
        s=socket.socket(socket.AF_UNIX); s.connect(state+"/control.sock"); return s
    def s_tcp(data=None):
        s=socket.socket(); s.connect(("127.0.0.1", port));
        if data: s.send(data)
        return s
    socks=[]
    for i in range(n):
        try: socks.append(connect())
        except OSError as e: pass
    time.sleep(1)
    peak=rss(); pf=fds()
    for s in socks: s.close()
    settle()
    print("%s: %d connections: rss at peak %d MB, fds %d; after close rss %d MB, fds %d" % (name, len(socks), peak, pf, rss(), fds()))
