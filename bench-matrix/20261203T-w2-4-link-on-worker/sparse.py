import socket, time, sys
P=int(sys.argv[1]); R=int(sys.argv[2]); N=int(sys.argv[3])
def conn(port):
    s=socket.create_connection(("127.0.0.1",port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1); return s
p=conn(P); r=conn(R)
def enc(*a): return b"*%d\r\n"%len(a)+b"".join(b"$%d\r\n%s\r\n"%(len(x),x) for x in a)
def cmd(s,*a):
    s.sendall(enc(*a)); return s.recv(100)
lags=[]
for i in range(N):
    time.sleep(0.005)
    cmd(p,b"SET",b"sparse%d"%i,b"1")
    t1=time.perf_counter()
    while cmd(r,b"EXISTS",b"sparse%d"%i)!=b":1\r\n": pass
    lags.append((time.perf_counter()-t1)*1e6)
lags.sort()
print("sparse SET under GET load, from reply: p50 %.0f us p90 %.0f p99 %.0f max %.0f"%(lags[len(lags)//2],lags[int(len(lags)*.9)],lags[int(len(lags)*.99)],lags[-1]))
