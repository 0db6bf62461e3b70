input ids: i32[B, 2, 3]
label y: i32[B]
