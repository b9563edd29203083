#map = affine_map<(d0) -> ((d0 floordiv 4) mod 2)>
module {
  func.func @two(%arg0: memref<4096xf32>, %arg1: memref<4096xf32>, %arg2: memref<4096xf32>) {
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %c1024 = arith.constant 1024 : index
    %alloc = memref.alloc() : memref<2x4xf32, #gpu.address_space<workgroup>>
    %alloc_0 = memref.alloc() : memref<2x4xf32, #gpu.address_space<workgroup>>
    %c0_1 = arith.constant 0 : index
    %0 = arith.muli %c4, %c0_1 : index
    %1 = arith.addi %c0, %0 : index
    %2 = affine.apply #map(%1)
    %subview = memref.subview %alloc_0[%2, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %3 = affine.apply #map(%1)
    %subview_2 = memref.subview %alloc[%3, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %4 = nvgpu.device_async_copy %arg0[%1], %subview_2[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %5 = nvgpu.device_async_copy %arg1[%1], %subview[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %6 = nvgpu.device_async_create_group %4, %5
    %c1 = arith.constant 1 : index
    %7 = arith.muli %c4, %c1 : index
    %8 = arith.addi %c0, %7 : index
    %9 = affine.apply #map(%8)
    %subview_3 = memref.subview %alloc_0[%9, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %10 = affine.apply #map(%8)
    %subview_4 = memref.subview %alloc[%10, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %11 = nvgpu.device_async_copy %arg0[%8], %subview_4[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %12 = nvgpu.device_async_copy %arg1[%8], %subview_3[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %13 = nvgpu.device_async_create_group %11, %12
    %c2 = arith.constant 2 : index
    %14 = arith.muli %c4, %c2 : index
    %15 = arith.subi %c1024, %14 : index
    %16:6 = scf.for %arg3 = %c0 to %15 step %c4 iter_args(%arg4 = %6, %arg5 = %13, %arg6 = %subview_2, %arg7 = %subview_4, %arg8 = %subview, %arg9 = %subview_3) -> (!nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>) {
      nvgpu.device_async_wait %arg4 {numGroups = 1 : i32}
      %35 = memref.load %arg6[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %36 = memref.load %arg8[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %37 = arith.addf %35, %36 : f32
      %c0_8 = arith.constant 0 : index
      %38 = arith.muli %c4, %c0_8 : index
      %39 = arith.addi %arg3, %38 : index
      memref.store %37, %arg2[%39] : memref<4096xf32>
      %c2_9 = arith.constant 2 : index
      %40 = arith.muli %c4, %c2_9 : index
      %41 = arith.addi %arg3, %40 : index
      %42 = affine.apply #map(%41)
      %subview_10 = memref.subview %alloc_0[%42, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c2_11 = arith.constant 2 : index
      %43 = arith.muli %c4, %c2_11 : index
      %44 = arith.addi %arg3, %43 : index
      %45 = affine.apply #map(%44)
      %subview_12 = memref.subview %alloc[%45, 0] [1, 4] [1, 1] : memref<2x4xf32, #gpu.address_space<workgroup>> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c2_13 = arith.constant 2 : index
      %46 = arith.muli %c4, %c2_13 : index
      %47 = arith.addi %arg3, %46 : index
      %48 = nvgpu.device_async_copy %arg0[%47], %subview_12[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %c2_14 = arith.constant 2 : index
      %49 = arith.muli %c4, %c2_14 : index
      %50 = arith.addi %arg3, %49 : index
      %51 = nvgpu.device_async_copy %arg1[%50], %subview_10[%c0], 4 : memref<4096xf32> to memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
      %52 = nvgpu.device_async_create_group %48, %51
      scf.yield %arg5, %52, %arg7, %subview_12, %arg9, %subview_10 : !nvgpu.device.async.token, !nvgpu.device.async.token, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>, memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    }
    %c-1 = arith.constant -1 : index
    %17 = arith.addi %c1024, %c-1 : index
    %18 = arith.subi %17, %c0 : index
    %19 = arith.divui %18, %c4 : index
    %c0_5 = arith.constant 0 : index
    %20 = arith.addi %19, %c0_5 : index
    %21 = arith.muli %c4, %20 : index
    %22 = arith.addi %c0, %21 : index
    %c-1_6 = arith.constant -1 : index
    %23 = arith.addi %c1024, %c-1_6 : index
    %24 = arith.subi %23, %c0 : index
    %25 = arith.divui %24, %c4 : index
    %c-1_7 = arith.constant -1 : index
    %26 = arith.addi %25, %c-1_7 : index
    %27 = arith.muli %c4, %26 : index
    %28 = arith.addi %c0, %27 : index
    nvgpu.device_async_wait %16#0 {numGroups = 1 : i32}
    %29 = memref.load %16#2[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %30 = memref.load %16#4[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %31 = arith.addf %29, %30 : f32
    memref.store %31, %arg2[%28] : memref<4096xf32>
    nvgpu.device_async_wait %16#1 {numGroups = 0 : i32}
    %32 = memref.load %16#3[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %33 = memref.load %16#5[%c0] : memref<4xf32, strided<[1], offset: ?>, #gpu.address_space<workgroup>>
    %34 = arith.addf %32, %33 : f32
    memref.store %34, %arg2[%22] : memref<4096xf32>
    return
  }
  module attributes {transform.with_named_sequence} {
    transform.named_sequence @__transform_main(%arg0: !transform.any_op {transform.readonly}) {
      %0 = transform.structured.match ops{["memref.alloc"]} in %arg0 : (!transform.any_op) -> !transform.op<"memref.alloc">
      %1 = transform.memref.multibuffer %0 {factor = 2 : i64, skip_analysis} : (!transform.op<"memref.alloc">) -> !transform.any_op
      %2 = transform.structured.match ops{["scf.for"]} in %arg0 : (!transform.any_op) -> !transform.op<"scf.for">
      %3 = transform.nvgpu.pipeline_shared_memory_copies failures(propagate) %2 {depth = 2 : i64, peel_epilogue} : (!transform.op<"scf.for">) -> !transform.any_op
      transform.yield 
    }
  }
}

