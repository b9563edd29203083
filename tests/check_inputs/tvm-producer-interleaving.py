# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((32, 16), "float32"), Z: T.Buffer((32, 16), "float32"), Y: T.Buffer((32, 16), "float32")):
        # with T.sblock("root"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock(""):
                T.reads(X[t, 0:16], Z[t, 0:16])
                T.writes(Y[t, 0:16])
                P = T.sblock_alloc_buffer((4, 32, 1), scope="shared")
                Q = T.sblock_alloc_buffer((4, 32, 1), scope="shared")
                with T.sblock(""):
                    T.reads(X[t, 0:3], Z[t, 0:3])
                    T.writes(P[0:3, t, 0], Q[0:3, t, 0])
                    for k in T.unroll(3):
                        with T.sblock(""):
                            T.where(k < 16)
                            T.reads(X[t, k], Z[t, k])
                            T.writes(P[k % 4, t, 0], Q[k % 4, t, 0])
                            T.attr({"async_commit_queue_scope": 0})
                            with T.attr({"async_scope": 1}):
                                P[k % 4, t, 0] = X[t, k]
                            with T.attr({"async_scope": 1}):
                                Q[k % 4, t, 0] = Z[t, k]
                with T.sblock(""):
                    T.reads(X[t, 3:16], P[0:4, t, 0], Q[0:4, t, 0], Z[t, 3:16])
                    T.writes(P[0:4, t, 0], Y[t, 0:13], Q[0:4, t, 0])
                    for k in range(13):
                        with T.sblock(""):
                            T.where(k + 3 < 16)
                            T.reads(X[t, k + 3])
                            T.writes(P[(k + 3) % 4, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            P[(k + 3) % 4, t, 0] = X[t, k + 3]
                        with T.sblock("use"):
                            T.where(k + 3 - 3 < 16)
                            T.reads(P[0:4, t, 0], Q[0:4, t, 0])
                            T.writes(Y[t, k - 3 + 3])
                            T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 5})
                            Y[t, k - 3 + 3] = P[(k - 3 + 3) % 4, t, 0] - Q[(k - 3 + 3) % 4, t, 0]
                        with T.sblock(""):
                            T.where(k + 3 < 16)
                            T.reads(Z[t, k + 3])
                            T.writes(Q[(k + 3) % 4, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            Q[(k + 3) % 4, t, 0] = Z[t, k + 3]
                with T.sblock(""):
                    T.reads(P[0:4, t, 0], Q[0:4, t, 0])
                    T.writes(Y[t, 13:16])
                    for k in T.unroll(3):
                        with T.sblock("use"):
                            T.where(k + 16 - 3 < 16)
                            T.reads(P[0:4, t, 0], Q[0:4, t, 0])
                            T.writes(Y[t, k - 3 + 16])
                            T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 2 - k})
                            Y[t, k - 3 + 16] = P[(k - 3 + 16) % 4, t, 0] - Q[(k - 3 + 16) % 4, t, 0]