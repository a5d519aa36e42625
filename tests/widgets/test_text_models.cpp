// The GUI's jobs on a text model: a Hugging Face BERT folder (config.json + model.safetensors +
// vocab.txt, written by the test from tests/data/hf) opened as File > Open Model does, a .txt
// opened as File > Open Data does (tokenized by the model's own tokenizer), and a Quantize run
// whose report carries the encoder's metric (embedding cosine) on the text's lines.

#include "model_loader.h"
#include "quant_job.h"

#include "io/dataset.h"
#include "io/file_util.h"
#include "io/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

using namespace bitlens;

namespace {

/// A BERT folder from the golden tiny model, with a 64-word vocabulary (the model's size).
QString writeBertFolder(const QTemporaryDir& dir)
{
    const std::string hf = std::string(BITLENS_TEST_DATA) + "/hf/";
    std::ifstream in(hf + "bert.json");
    const nlohmann::json config = nlohmann::json::parse(in);
    auto arrays = io::readNpz(hf + "bert.npz");
    if (!arrays)
        return {};
    std::map<std::string, at::Tensor> weights;
    for (auto& [key, t] : *arrays)
        if (key.rfind("__", 0) != 0)
            weights[key] = t.contiguous();
    const std::string path = dir.path().toStdString();
    const std::string text = config.dump();
    if (!io::writeFileAtomic(path + "/config.json", text.data(), text.size()))
        return {};
    if (!io::writeSafetensors(weights, {}, path + "/model.safetensors"))
        return {};
    std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
    for (int i = 5; i < 64; ++i)
        vocab += "w" + std::to_string(i) + "\n";
    if (!io::writeFileAtomic(path + "/vocab.txt", vocab.data(), vocab.size()))
        return {};
    return dir.path();
}

} // namespace

class TestTextModels : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void quantizeEncoderOnText();
};

void TestTextModels::quantizeEncoderOnText()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString folder = writeBertFolder(dir);
    QVERIFY(!folder.isEmpty());
    std::string lines;
    for (int i = 0; i < 12; ++i)
        lines += "w" + std::to_string(5 + i) + " w" + std::to_string(20 + i % 7) + " w" +
                 std::to_string(40 + i % 11) + "\n";
    const std::string textPath = dir.filePath(QStringLiteral("lines.txt")).toStdString();
    QVERIFY(io::writeFileAtomic(textPath, lines.data(), lines.size()));

    auto opened = widgets::openModelForGui(folder.toStdString(), Progress::none(), CancelToken());
    QVERIFY2(opened, opened ? "" : opened.error().userMessage().c_str());
    const ModelSummary& summary = opened->model->summary();
    QCOMPARE(summary.architecture, std::string("bert"));
    QCOMPARE(summary.metric, std::string("embedding_cosine"));
    QVERIFY(opened->model->tokenizer());

    // Without a model, text has nothing to be tokenized by; with one, it becomes its rows.
    auto noModel = widgets::openDataForGui(textPath, Progress::none(), CancelToken());
    QVERIFY(!noModel);
    auto data = widgets::openDataForGui(textPath, Progress::none(), CancelToken(), opened->model);
    QVERIFY2(data, data ? "" : data.error().userMessage().c_str());
    QCOMPARE(data->kind, std::string("text"));
    QCOMPARE(data->samples, std::int64_t{12});
    QCOMPARE(data->sampleShape, (std::vector<std::int64_t>{5}));  // [CLS] 3 words [SEP]

    widgets::QuantSession session(opened->model, {});
    widgets::QuantRequest request;
    request.scheme = "dynamic-int8";
    request.calibPath = textPath;
    request.evalPath = textPath;
    auto report = widgets::runQuantization(session, request, Progress::none(), CancelToken());
    QVERIFY2(report, report ? "" : report.error().userMessage().c_str());
    const nlohmann::json& metric = (*report)["metric"];
    QCOMPARE(metric["name"].get<std::string>(), std::string("embedding_cosine"));
    QCOMPARE(metric["samples"].get<std::int64_t>(), std::int64_t{12});
    QCOMPARE(metric["float"].get<double>(), 1.0);
    QVERIFY(metric["quantized"].get<double>() > 0.9);
    QVERIFY(metric["quantized"].get<double>() < 1.0);
    QCOMPARE((*report)["layers"].size(), std::size_t{2 * 6});
}

QTEST_MAIN(TestTextModels)
#include "test_text_models.moc"
