# RUN: dtc %s --emit=mlir | FileCheck %s --enable-var-scope
# RUN: dtc %s --emit=cpp | FileCheck %s --check-prefix=CPP
# RUN: dtc %s --target=cuda --emit=cpp | FileCheck %s --check-prefix=CUDA
# A byte-level language model: i32[B, T] token ids, embedding as
# torch.nn.Embedding (`<name>.weight` [num, dim], N(0, 1) unless init= says
# otherwise), cross_entropy and accuracy over [B, T, V] logits against
# [B, T] labels with ignore_index, and text() data, which holds out its last
# tenth by default. The program reads the ids from StepArgs::xIds and tells
# the runtime the table's rows (its data check) and the ignored label.
model lm
input ids: i32[B, 8]
label y: i32[B, 8]
wte = embedding(ids, 200, 16)
pos = embedding(ids, num_embeddings=256, embedding_dim=16, init=normal(0, 0.02))
h = layer_norm(wte + pos)
logits = linear(h, 256)
loss = cross_entropy(logits, y, ignore_index=-1)
metric acc = accuracy(logits, y, ignore_index=-1)
train {
  data = text("/usr/share/games/fortunes", block=8)
}
# CHECK: dtc.recipe = #dtc.recipe<data = text, train = "/usr/share/games/fortunes", validation = 0.1>
# CHECK: dtc.param @wte.weight : tensor<200x16xf32> {b = 1.000000e+00 : f64, init = #dtc.init<normal>}
# CHECK: dtc.param @pos.weight : tensor<256x16xf32> {b = 2.000000e-02 : f64, init = #dtc.init<normal>}
# CHECK: func.func @forward(%arg0: tensor<?x8xi32> {dtc.name = "ids"}, %arg1: tensor<?x8xi32> {dtc.name = "y"})
# CHECK: %[[W:.*]] = dtc.param_ref @wte.weight
# CHECK: dtc.embedding %arg0, %[[W]] : tensor<?x8xi32>, tensor<200x16xf32> -> tensor<?x8x16xf32>
# CHECK: dtc.cross_entropy %{{.*}}, %arg1 {ignore_index = -1 : i64} : tensor<?x8x256xf32>, tensor<?x8xi32> -> tensor<f32>
# CHECK: dtc.accuracy %{{.*}}, %arg1 {ignore_index = -1 : i64}
# CPP-LABEL: trainStep
# CPP: dtc::kern::embedding(c, {{v[0-9]+}}, const_cast<int32_t *>(a.xIds), B*8, 200, 16,
# CPP: dtc::kern::crossEntropy(c, {{v[0-9]+}}, a.yClass, B*8, 256, -1,
# CPP: dtc::kern::crossEntropyGrad(c, {{v[0-9]+}}, a.yClass, B*8, 256, -1,
# CPP: dtc::kern::embeddingGrad(c, const_cast<int32_t *>(a.xIds), {{v[0-9]+}}, B*8, 256, 16,
# CPP: dtc::kern::embeddingGrad(c, const_cast<int32_t *>(a.xIds), {{v[0-9]+}}, B*8, 200, 16,
# CPP-LABEL: makeSpec
# CPP: s.inputType = dtc::rt::ElementType::I32;
# CPP: s.inputIdLimit = 200;
# CPP: s.ignoreIndex = -1;
# CPP: s.labelNumel = 8;
# CPP: s.numClasses = 256;
# CPP: s.recipe.data.kind = dtc::rt::DatasetKind::Text;
# CPP: s.recipe.data.trainPath = "/usr/share/games/fortunes";
# CPP: s.recipe.validation = 0.10000000000000001;
# CUDA: dtc::cuda::embedding(c,
# CUDA: dtc::cuda::embeddingGrad(c,
