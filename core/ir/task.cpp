#include "ir/task.h"

namespace bitlens::ir {

Task taskOf(const Graph& graph)
{
    const auto it = graph.metadata.find("task");
    if (it == graph.metadata.end())
        return Task::Classification;
    if (it->second == "lm")
        return Task::LanguageModel;
    if (it->second == "embedding")
        return Task::Embedding;
    if (it->second == "sequence")
        return Task::Sequence;
    return Task::Classification;
}

std::string_view taskName(Task task)
{
    switch (task) {
    case Task::Classification: return "classification";
    case Task::LanguageModel: return "lm";
    case Task::Embedding: return "embedding";
    case Task::Sequence: return "sequence";
    }
    return "classification";
}

std::string_view metricNameOf(Task task)
{
    switch (task) {
    case Task::Classification: return "top1";
    case Task::LanguageModel: return "perplexity";
    case Task::Embedding: return "embedding_cosine";
    case Task::Sequence: return "output_agreement";
    }
    return "?";
}

} // namespace bitlens::ir
