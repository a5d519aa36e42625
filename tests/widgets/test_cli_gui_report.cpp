// The CLI and the GUI give the same report.json for the same model, data and scheme: the
// window's run (the model opened as File > Open Model opens it, the request the Quantize panel
// makes with its default evaluation size for that model, widgets::runQuantization) against
// `bitlens-cli quantize MODEL --scheme S <the panel's evaluation flags> --report cli.json`,
// compared key by key, on an image classifier, a language model and a sentence encoder. Only
// measured timings are left out: kTimingKeys names them, and kTimingNote the layer notes made
// of measured milliseconds. Both go through core/workspace; the test fails as soon as one
// front end prepares, feeds or reports a run differently.

#include "model_loader.h"
#include "quant_job.h"
#include "quant_panel.h"

#include "zoo/zoo.h"

#include <nlohmann/json.hpp>

#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace bitlens;
using nlohmann::json;

namespace {

/// JSON pointers of the measured timings, the only keys whose values may differ.
const std::set<std::string> kTimingKeys = {
    "/seconds",                            // wall time of the run
    "/throughput/float_samples_per_s",     // timed on this machine, now
    "/throughput/quantized_samples_per_s",
    "/throughput/layers_ms",               // per-layer milliseconds
    "/throughput/why",                     // present only when the timed run was slower
    "/throughput/runs",                    // how many runs the time budget allowed
    "/throughput/layer_runs",
    "/qat/seconds",                        // training wall time (qat-* schemes)
};

/// A note written from measured milliseconds (analysis::Throughput::notes, copied into the
/// layer's "note"): whether it appears, and its numbers, depend on the timing.
constexpr const char* kTimingNote = "real kernel slower than float32 here (";

/// `report` without its timing notes: /layers/*/note and /throughput/notes/* that are one.
json withoutTimingNotes(json report)
{
    const auto isTimingNote = [](const json& note) {
        return note.is_string() && note.get<std::string>().rfind(kTimingNote, 0) == 0;
    };
    for (json& layer : report["layers"])
        if (layer.contains("note") && isTimingNote(layer["note"]))
            layer.erase("note");
    json& throughput = report["throughput"];
    if (throughput.contains("notes")) {
        json kept = json::object();
        for (const auto& [layer, note] : throughput["notes"].items())
            if (!isTimingNote(note))
                kept[layer] = note;
        if (kept.empty())
            throughput.erase("notes");
        else
            throughput["notes"] = kept;
    }
    return report;
}

/// Every place where `a` and `b` differ, as "pointer: a-value != b-value", skipping `skip`.
void diff(const json& a, const json& b, const std::string& at, const std::set<std::string>& skip,
          std::vector<std::string>& out)
{
    if (skip.count(at))
        return;
    if (a.is_object() && b.is_object()) {
        for (const auto& [key, value] : a.items())
            diff(value, b.contains(key) ? b[key] : json(), at + "/" + key, skip, out);
        for (const auto& [key, value] : b.items())
            if (!a.contains(key) && !skip.count(at + "/" + key))
                out.push_back(at + "/" + key + ": missing in the GUI's report");
        return;
    }
    if (a.is_array() && b.is_array() && a.size() == b.size()) {
        for (std::size_t i = 0; i < a.size(); ++i)
            diff(a[i], b[i], at + "/" + std::to_string(i), skip, out);
        return;
    }
    if (a != b)
        out.push_back(at + ": " + a.dump().substr(0, 80) + " != " + b.dump().substr(0, 80));
}

} // namespace

class TestCliGuiReport : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void sameReport_data();
    void sameReport();

private:
    QString m_cli;
    QTemporaryDir m_dir;
};

void TestCliGuiReport::initTestCase()
{
    m_cli = qEnvironmentVariable("BITLENS_CLI");
    if (m_cli.isEmpty())
        QSKIP("BITLENS_CLI (the bitlens-cli to compare with) is not set");
    QVERIFY(m_dir.isValid());
}

void TestCliGuiReport::sameReport_data()
{
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("scheme");
    QTest::addColumn<QString>("overrideLayer");
    const QString cnn = QStringLiteral("fashion-cnn");
    QTest::newRow("static-int8") << cnn << QStringLiteral("static-int8") << QString();
    // The GUI's "float32" and the scheme file's "float" both keep a layer float32.
    QTest::newRow("w4-int4, fc1 float")
        << cnn << QStringLiteral("w4-int4") << QStringLiteral("fc1");
    // The window's default evaluation of a language model (token windows, --limit N) and of
    // an encoder (lines).
    QTest::newRow("kjv-llama w4-nf4") << QStringLiteral("kjv-llama") << QStringLiteral("w4-nf4")
                                      << QString();
    QTest::newRow("minilm-l6 dynamic-int8")
        << QStringLiteral("minilm-l6") << QStringLiteral("dynamic-int8") << QString();
}

void TestCliGuiReport::sameReport()
{
    QFETCH(QString, model);
    QFETCH(QString, scheme);
    QFETCH(QString, overrideLayer);
    if (!zoo::isBuilt(model.toStdString()))
        QSKIP(qPrintable(model + QStringLiteral(" is not built (scripts/zoo-ensure builds it)")));

    // The GUI: the model as File > Open Model opens a zoo name, the request as the Quantize
    // panel and the window make it (no data opened: the zoo model's own; the panel's default
    // evaluation size for that model, as MainWindow sets it when the model opens).
    auto opened = widgets::openModelForGui(model.toStdString(), Progress::none(), CancelToken());
    QVERIFY2(opened.ok(), opened.ok() ? "" : opened.error().userMessage().c_str());
    widgets::QuantSession session(opened->model, opened->zooName);
    widgets::QuantPanel panel;
    panel.setEvaluationFor(*opened->model);
    widgets::QuantRequest request;
    request.scheme = scheme.toStdString();
    request.evalLimit = panel.evalLimit();
    request.evalTokens = panel.evalTokens();
    if (!overrideLayer.isEmpty())
        request.overrides[overrideLayer.toStdString()] = "float32";
    auto gui = widgets::runQuantization(session, request, Progress::none(), CancelToken());
    QVERIFY2(gui.ok(), gui.ok() ? "" : gui.error().userMessage().c_str());

    // The CLI on the same model, data and scheme; overrides come in a scheme file.
    QString spec = scheme;
    if (!overrideLayer.isEmpty()) {
        spec = m_dir.filePath(QStringLiteral("scheme-%1.json").arg(QTest::currentDataTag())
                                  .replace(QLatin1Char(' '), QLatin1Char('_'))
                                  .replace(QLatin1Char(','), QLatin1Char('_')));
        std::ofstream(spec.toStdString())
            << json{{"preset", scheme.toStdString()},
                    {"overrides", {{overrideLayer.toStdString(), "float"}}}}
                   .dump();
    }
    const QString reportPath = m_dir.filePath(QStringLiteral("cli.json"));
    QProcess cli;
    cli.start(m_cli, QStringList{QStringLiteral("quantize"), model, QStringLiteral("--scheme"),
                                 spec}
                         + panel.evalCliFlags()
                         + QStringList{QStringLiteral("--report"), reportPath,
                                       QStringLiteral("--quiet"), QStringLiteral("--json")});
    QVERIFY(cli.waitForFinished(600000));
    QVERIFY2(cli.exitCode() == 0, cli.readAllStandardError().constData());
    std::ifstream in(reportPath.toStdString());
    const json fromCli = json::parse(in, nullptr, false);
    QVERIFY(fromCli.is_object());

    // How the scheme was given differs by design (a file name vs "SPEC with overrides ...");
    // what it is (config, overrides) must not.
    std::set<std::string> skip = kTimingKeys;
    if (!overrideLayer.isEmpty())
        skip.insert("/scheme/spec");
    std::vector<std::string> differences;
    diff(withoutTimingNotes(*gui), withoutTimingNotes(fromCli), "", skip, differences);
    QVERIFY(fromCli["layers"].size() > 0);
    if (panel.evaluationUnit() == widgets::QuantPanel::EvalUnit::Samples)
        QCOMPARE(fromCli["metric"]["samples"], json(request.evalLimit));
    else
        QVERIFY(!panel.evalCliFlags().isEmpty());  // the GUI's default is not the CLI's
    for (const std::string& d : differences)
        qWarning("%s", d.c_str());
    QVERIFY2(differences.empty(),
             ("the GUI's and the CLI's report.json differ at " +
              std::to_string(differences.size()) + " place(s), first: " +
              (differences.empty() ? std::string() : differences.front()))
                 .c_str());
    if (!overrideLayer.isEmpty())
        QCOMPARE((*gui)["scheme"]["overrides"][overrideLayer.toStdString()], json("float"));
}

QTEST_MAIN(TestCliGuiReport)
#include "test_cli_gui_report.moc"
