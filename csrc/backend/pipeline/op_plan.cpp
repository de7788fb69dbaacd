#include "backend/pipeline/op_plan.h"

namespace tt::backend {

OpPlan make_plan(const std::string& functional, const lowering::Rule* rule, Mode mode,
                 std::optional<c10::OperatorHandle> functional_op) {
  OpPlan p{functional, rule, mode, std::move(functional_op)};
  if (functional == "aten::index.Tensor") p.mask_indexing = MaskIndexing::Read;
  if (functional == "aten::index_put" || functional == "aten::_index_put_impl") p.mask_indexing = MaskIndexing::Write;
  return p;
}

}  // namespace tt::backend
