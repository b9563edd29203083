# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(X: T.Buffer((32, 16), "float32"), Y: T.Buffer((32, 16), "float32")):
        # with T.sblock("root"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock(""):
                T.reads(X[t, 0:16])
                T.writes(Y[t, 0:16])
                S1 = T.sblock_alloc_buffer((2, 32, 1), scope="shared")
                S2 = T.sblock_alloc_buffer((2, 32, 1), scope="shared")
                with T.sblock(""):
                    T.reads(X[t, 0:2], S1[0:2, t, 0])
                    T.writes(S1[0:2, t, 0], S2[0:2, t, 0])
                    for k in T.unroll(2):
                        with T.sblock(""):
                            T.where(k < 16)
                            T.reads(X[t, k])
                            T.writes(S1[k % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            S1[k % 2, t, 0] = X[t, k]
                        with T.sblock(""):
                            T.where(k == 1 and k - 1 < 16)
                            T.reads(S1[(k - 1) % 2, t, 0])
                            T.writes(S2[(k - 1) % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 1, "async_wait_queue_scope": 0, "async_wait_inflight_count": 1, "async_scope": 1})
                            S2[(k - 1) % 2, t, 0] = S1[(k - 1) % 2, t, 0] * T.float32(2.0)
                with T.sblock(""):
                    T.reads(X[t, 2:16], S1[0:2, t, 0], S2[0:2, t, 0])
                    T.writes(S1[0:2, t, 0], S2[0:2, t, 0], Y[t, 0:14])
                    for k in range(14):
                        with T.sblock(""):
                            T.where(k + 2 < 16)
                            T.reads(X[t, k + 2])
                            T.writes(S1[(k + 2) % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            S1[(k + 2) % 2, t, 0] = X[t, k + 2]
                        with T.sblock(""):
                            T.where(k + 2 - 1 < 16)
                            T.reads(S1[(k - 1 + 2) % 2, t, 0])
                            T.writes(S2[(k - 1 + 2) % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 1, "async_wait_queue_scope": 0, "async_wait_inflight_count": 1, "async_scope": 1})
                            S2[(k - 1 + 2) % 2, t, 0] = S1[(k - 1 + 2) % 2, t, 0] * T.float32(2.0)
                        with T.sblock("use"):
                            T.where(k + 2 - 2 < 16)
                            T.reads(S2[0:2, t, 0])
                            T.writes(Y[t, k - 2 + 2])
                            T.attr({"async_wait_queue_scope": 1, "async_wait_inflight_count": 1})
                            Y[t, k - 2 + 2] = S2[(k - 2 + 2) % 2, t, 0] + T.float32(1.0)
                with T.sblock(""):
                    T.reads(S1[0:2, t, 0], S2[0:2, t, 0])
                    T.writes(S2[0:2, t, 0], Y[t, 14:16])
                    for k in T.unroll(2):
                        with T.sblock(""):
                            T.where(k + 16 - 1 < 16)
                            T.reads(S1[(k - 1 + 16) % 2, t, 0])
                            T.writes(S2[(k - 1 + 16) % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 1, "async_wait_queue_scope": 0, "async_wait_inflight_count": 0 - k, "async_scope": 1})
                            S2[(k - 1 + 16) % 2, t, 0] = S1[(k - 1 + 16) % 2, t, 0] * T.float32(2.0)
                        with T.sblock("use"):
                            T.where(k + 16 - 2 < 16)
                            T.reads(S2[0:2, t, 0])
                            T.writes(Y[t, k - 2 + 16])
                            T.attr({"async_wait_queue_scope": 1, "async_wait_inflight_count": T.if_then_else(k + 16 - 1 < 16, 1, 0)})
                            Y[t, k - 2 + 16] = S2[(k - 2 + 16) % 2, t, 0] + T.float32(1.0)