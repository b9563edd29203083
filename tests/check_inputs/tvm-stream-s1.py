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
                S = T.sblock_alloc_buffer((2, 32, 1), scope="shared")
                with T.sblock(""):
                    T.reads(X[t, 0])
                    T.writes(S[T.FloorMod(0, 2), t, 0])
                    T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                    S[T.FloorMod(0, 2), t, 0] = X[t, 0]
                with T.sblock(""):
                    T.reads(X[t, 1:16], S[0:2, t, 0])
                    T.writes(S[0:2, t, 0], Y[t, 0:15])
                    for k in range(15):
                        with T.sblock(""):
                            T.where(k + 1 < 16)
                            T.reads(X[t, k + 1])
                            T.writes(S[(k + 1) % 2, t, 0])
                            T.attr({"async_commit_queue_scope": 0, "async_scope": 1})
                            S[(k + 1) % 2, t, 0] = X[t, k + 1]
                        with T.sblock("use"):
                            T.where(k + 1 - 1 < 16)
                            T.reads(S[(k - 1 + 1) % 2, t, 0])
                            T.writes(Y[t, k - 1 + 1])
                            T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 1})
                            Y[t, k - 1 + 1] = S[(k - 1 + 1) % 2, t, 0] * T.float32(2.0)
                with T.sblock("use"):
                    T.reads(S[T.FloorMod(15, 2), t, 0])
                    T.writes(Y[t, 15])
                    T.attr({"async_wait_queue_scope": 0, "async_wait_inflight_count": 0})
                    Y[t, 15] = S[T.FloorMod(15, 2), t, 0] * T.float32(2.0)