#map = affine_map<(d0) -> ((d0 floordiv 4) mod 2)>
module {
  func.func @stream(%arg0: memref<1024xf32>, %arg1: memref<1024xf32>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1024 = arith.constant 1024 : index
    %alloc = memref.alloc() : memref<2x4xf32, #gpu.address_space<workgroup>>
    %c0_0 = arith.constant 0 : index
    %0 = arith.muli %c4, %c0_0 : index
    %1 = arith.addi %c0, %0 : index
    %2 = affine.apply #map(%1)
    %subview = memref.subview %alloc[%2, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %3 = nvgpu.device_async_copy %arg0[%1], %subview[%c0], 4 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %4 = nvgpu.device_async_create_group %3
    %c1 = arith.constant 1 : index
    %5 = arith.muli %c4, %c1 : index
    %6 = arith.addi %c0, %5 : index
    %7 = affine.apply #map(%6)
    %subview_1 = memref.subview %alloc[%7, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %8 = nvgpu.device_async_copy %arg0[%6], %subview_1[%c0], 4 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %9 = nvgpu.device_async_create_group %8
    %10:4 = scf.for %arg2 = %c0 to %c1024 step %c4 iter_args(%arg3 = %4, %arg4 = %9, %arg5 = %subview, %arg6 = %subview_1) -> (!nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>) {
      %c2 = arith.constant 2 : index
      %11 = arith.muli %c4, %c2 : index
      %12 = arith.subi %c1024, %11 : index
      %13 = arith.cmpi slt, %arg2, %12 : index
      %c1_2 = arith.constant 1 : index
      %14 = arith.muli %c4, %c1_2 : index
      %15 = arith.subi %c1024, %14 : index
      %16 = arith.cmpi slt, %arg2, %15 : index
      nvgpu.device_async_wait %arg3 {numGroups = 1 : i32}
      %17 = memref.load %arg5[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c0_3 = arith.constant 0 : index
      %18 = arith.muli %c4, %c0_3 : index
      %19 = arith.addi %arg2, %18 : index
      memref.store %17, %arg1[%19] : memref<1024xf32>
      %c2_4 = arith.constant 2 : index
      %20 = arith.muli %c4, %c2_4 : index
      %21 = arith.addi %arg2, %20 : index
      %22 = affine.apply #map(%21)
      %subview_5 = memref.subview %alloc[%22, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c2_6 = arith.constant 2 : index
      %23 = arith.muli %c4, %c2_6 : index
      %24 = arith.addi %arg2, %23 : index
      %c4_7 = arith.constant 4 : index
      %c0_8 = arith.constant 0 : index
      %25 = arith.select %13, %c4_7, %c0_8 : index
      %26 = nvgpu.device_async_copy %arg0[%24], %subview_5[%c0], 4, %25 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %27 = nvgpu.device_async_create_group %26
      scf.yield %arg4, %27, %arg6, %subview_5 : !nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    }
    return
  }
  module attributes {transform.with_named_sequence} {
    transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
      %0 = transform.structured.match ops{["memref.alloc"]} in %arg0 : (!transform.any_op) -> !transform.op<"memref.alloc">
      %1 = transform.memref.multibuffer %0 {factor = 2 : i64, skip_analysis} : (!transform.op<"memref.alloc">) -> !transform.any_op
      %2 = transform.structured.match ops{["scf.for"]} in %arg0 : (!transform.any_op) -> !transform.op<"scf.for">
      %3 = transform.nvgpu.pipeline_shared_memory_copies failures(propagate) %2 {depth = 2 : i64} : (!transform.op<"scf.for">) -> !transform.any_op
      transform.yield 
    }
  }
}

