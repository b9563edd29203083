# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((32, "n"), "float32"), Y: T.Buffer((32, n), "float32")):
        n = T.int32()
        # with T.sblock("root"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock(""):
                T.reads(X[t, 0:T.max(2, n)])
                T.writes(Y[t, T.min(0, n - 2):T.min(0, n - 2) + T.max(n, 2)])
                S = T.sblock_alloc_buffer((3, 32, 1), scope="shared")
                with T.sblock(""):
                    T.reads(X[t, 0:2])
                    T.writes(S[0:2, t, 0])
                    for k in T.unroll(2):
                        with T.sblock(""):
                            T.where(k < n)
                            T.reads(X[t, k])
                            T.writes(S[k % 3, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            S[k % 3, t, 0] = X[t, k]
                with T.sblock(""):
                    T.reads(X[t, 2:2 + (n - 2)], S[0:3, t, 0])
                    T.writes(S[0:3, t, 0], Y[t, 0:n - 2])
                    for k in range(n - 2):
                        with T.sblock(""):
                            T.where(k + 2 < n)
                            T.reads(X[t, k + 2])
                            T.writes(S[(k + 2) % 3, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            S[(k + 2) % 3, t, 0] = X[t, k + 2]
                        with T.sblock("use"):
                            T.where(k + 2 - 2 < n)
                            T.reads(S[0:3, t, 0])
                            T.writes(Y[t, k - 2 + 2])
                            T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 2})
                            Y[t, k - 2 + 2] = S[(k - 2 + 2) % 3, t, 0] + T.float32(1.0)
                with T.sblock(""):
                    T.reads(S[0:3, t, 0])
                    T.writes(Y[t, n - 2:n - 2 + 2])
                    for k in T.unroll(n + 2 - n):
                        with T.sblock("use"):
                            T.where(2 <= k + n and k + n < n + 2 and 2 <= k + n)
                            T.reads(S[0:3, t, 0])
                            T.writes(Y[t, k - 2 + n])
                            T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 0})
                            Y[t, k - 2 + n] = S[(k - 2 + n) % 3, t, 0] + T.float32(1.0)