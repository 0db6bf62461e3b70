module {
  func.func @forward(%x: tensor<?x4xf32>) -> tensor<f32> {
    %0 = dtc.relu %x : tensor<?x4xf32>
    return %0 : tensor<?x4xf32>
  }
}
