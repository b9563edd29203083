#map = affine_map<(d0) -> ((d0 floordiv 4) mod 3)>
module {
  func.func @stream(%arg0: memref<1024xf32>, %arg1: memref<1024xf32>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1024 = arith.constant 1024 : index
    %alloc = memref.alloc() : memref<3x4xf32, #gpu.address_space<workgroup>>
    %c0_0 = arith.constant 0 : index
    %0 = arith.muli %c4, %c0_0 : index
    %1 = arith.addi %c0, %0 : index
    %2 = affine.apply #map(%1)
    %subview = memref.subview %alloc[%2, 0] [1, 4] [1, 1] : memref<3x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %3 = nvgpu.device_async_copy %arg0[%1], %subview[%c0], 4 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %4 = nvgpu.device_async_create_group %3
    %c1 = arith.constant 1 : index
    %5 = arith.muli %c4, %c1 : index
    %6 = arith.addi %c0, %5 : index
    %7 = affine.apply #map(%6)
    %subview_1 = memref.subview %alloc[%7, 0] [1, 4] [1, 1] : memref<3x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %8 = nvgpu.device_async_copy %arg0[%6], %subview_1[%c0], 4 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %9 = nvgpu.device_async_create_group %8
    %c2 = arith.constant 2 : index
    %10 = arith.muli %c4, %c2 : index
    %11 = arith.addi %c0, %10 : index
    %12 = affine.apply #map(%11)
    %subview_2 = memref.subview %alloc[%12, 0] [1, 4] [1, 1] : memref<3x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %13 = nvgpu.device_async_copy %arg0[%11], %subview_2[%c0], 4 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %14 = nvgpu.device_async_create_group %13
    %15:6 = scf.for %arg2 = %c0 to %c1024 step %c4 iter_args(%arg3 = %4, %arg4 = %9, %arg5 = %14, %arg6 = %subview, %arg7 = %subview_1, %arg8 = %subview_2) -> (!nvgpu.device.async.token, !nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>) {
      %c3 = arith.constant 3 : index
      %16 = arith.muli %c4, %c3 : index
      %17 = arith.subi %c1024, %16 : index
      %18 = arith.cmpi slt, %arg2, %17 : index
      %c2_3 = arith.constant 2 : index
      %19 = arith.muli %c4, %c2_3 : index
      %20 = arith.subi %c1024, %19 : index
      %21 = arith.cmpi slt, %arg2, %20 : index
      %c1_4 = arith.constant 1 : index
      %22 = arith.muli %c4, %c1_4 : index
      %23 = arith.subi %c1024, %22 : index
      %24 = arith.cmpi slt, %arg2, %23 : index
      nvgpu.device_async_wait %arg3 {numGroups = 2 : i32}
      %25 = memref.load %arg6[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c0_5 = arith.constant 0 : index
      %26 = arith.muli %c4, %c0_5 : index
      %27 = arith.addi %arg2, %26 : index
      memref.store %25, %arg1[%27] : memref<1024xf32>
      %c3_6 = arith.constant 3 : index
      %28 = arith.muli %c4, %c3_6 : index
      %29 = arith.addi %arg2, %28 : index
      %30 = affine.apply #map(%29)
      %subview_7 = memref.subview %alloc[%30, 0] [1, 4] [1, 1] : memref<3x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c3_8 = arith.constant 3 : index
      %31 = arith.muli %c4, %c3_8 : index
      %32 = arith.addi %arg2, %31 : index
      %c4_9 = arith.constant 4 : index
      %c0_10 = arith.constant 0 : index
      %33 = arith.select %18, %c4_9, %c0_10 : index
      %34 = nvgpu.device_async_copy %arg0[%32], %subview_7[%c0], 4, %33 : memref<1024xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %35 = nvgpu.device_async_create_group %34
      scf.yield %arg4, %arg5, %35, %arg7, %arg8, %subview_7 : !nvgpu.device.async.token, !nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    }
    return
  }
  module attributes {transform.with_named_sequence} {
    transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
      %0 = transform.structured.match ops{["memref.alloc"]} in %arg0 : (!transform.any_op) -> !transform.op<"memref.alloc">
      %1 = transform.memref.multibuffer %0 {factor = 3 : i64, skip_analysis} : (!transform.op<"memref.alloc">) -> !transform.any_op
      %2 = transform.structured.match ops{["scf.for"]} in %arg0 : (!transform.any_op) -> !transform.op<"scf.for">
      %3 = transform.nvgpu.pipeline_shared_memory_copies failures(propagate) %2 {depth = 3 : i64} : (!transform.op<"scf.for">) -> !transform.any_op
      transform.yield 
    }
  }
}

