// MainWindow as a user meets it: a model opens into the layer table and status bar, a bad
// file reports the file and the reason and leaves the open model on screen, the last of two
// quick requests wins, Cancel keeps the model, data shows its summary, drops and Recent Files
// open files. Models and data are written by the test (no zoo build).

#include "job_progress_widget.h"
#include "job_runner.h"
#include "layer_table_model.h"
#include "main_window.h"
#include "model_fixtures.h"
#include "side_panels.h"

#include "model/model.h"

#include <QAction>
#include <QDropEvent>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QMenu>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QUrl>
#include <QCheckBox>
#include <QtTest>

using bitlens::widgets::JobRunner;
using bitlens::widgets::LayerTableModel;
using bitlens::widgets::MainWindow;

namespace {

/// Waits for every job of `window` and delivers what they posted.
void settle(MainWindow& window)
{
    QVERIFY(window.modelJobs()->waitForWorkers(30000));
    QVERIFY(window.dataJobs()->waitForWorkers(30000));
    QCoreApplication::processEvents();
    QTest::qWait(20);
}

/// The user-facing text of opening `path` with the core directly (reason and byte offset).
QString coreReason(const QString& path)
{
    auto opened = bitlens::openModel(path.toStdString());
    if (opened.ok())
        return {};
    QString reason = QString::fromStdString(opened.error().message);
    if (opened.error().offset)
        reason += QStringLiteral(" (at byte %1)").arg(*opened.error().offset);
    return reason;
}

} // namespace

class TestMainWindow : public QObject {
    Q_OBJECT

private Q_SLOTS:
    void initTestCase();
    void init();
    void opensModel();
    void badFileKeepsOpenModel();
    void missingFileKeepsOpenModel();
    void lastRequestWins();
    void cancelKeepsOpenModel();
    void cancelStopsZooTraining();
    void opensData();
    void badDataKeepsOpenData();
    void dropOpensModel();
    void recentFilesReopen();

private:
    void openAndWait(MainWindow& window, const QString& path);

    QTemporaryDir m_dir;
    QString m_small;      // hidden 4: 1,490 params
    QString m_wide;       // hidden 8: 2,970 params
    QString m_truncated;  // m_small cut in half
    QString m_npy;        // 5 samples of [1, 8, 8]
};

void TestMainWindow::initTestCase()
{
    // Keep Recent Files out of the user's real settings.
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(m_dir.isValid());
    m_small = m_dir.filePath(QStringLiteral("small.onnx"));
    m_wide = m_dir.filePath(QStringLiteral("wide.onnx"));
    m_truncated = m_dir.filePath(QStringLiteral("truncated.onnx"));
    m_npy = m_dir.filePath(QStringLiteral("images.npy"));
    std::string error = bitlens::testing::writeSmallCnn(m_small, 4, "small-cnn");
    QVERIFY2(error.empty(), error.c_str());
    error = bitlens::testing::writeSmallCnn(m_wide, 8, "wide-cnn");
    QVERIFY2(error.empty(), error.c_str());
    error = bitlens::testing::writeSmallNpy(m_npy, 5);
    QVERIFY2(error.empty(), error.c_str());

    QFile small(m_small);
    QVERIFY(small.open(QIODevice::ReadOnly));
    const QByteArray bytes = small.readAll();
    QFile truncated(m_truncated);
    QVERIFY(truncated.open(QIODevice::WriteOnly));
    QCOMPARE(truncated.write(bytes.left(bytes.size() / 2)), bytes.size() / 2);
}

void TestMainWindow::init()
{
    QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens")).clear();
}

void TestMainWindow::openAndWait(MainWindow& window, const QString& path)
{
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QSignalSpy errors(&window, &MainWindow::errorShown);
    window.openModel(path);
    QVERIFY(loaded.wait(30000));
    QCOMPARE(errors.size(), 0);
}

void TestMainWindow::opensModel()
{
    MainWindow window(m_small);
    window.setDialogsEnabled(false);
    window.show();
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QVERIFY(window.isBusy());
    QVERIFY(window.jobProgress()->isVisible());
    QVERIFY2(window.jobProgress()->text().startsWith(QStringLiteral("Opening small.onnx · ")) &&
                 window.jobProgress()->text().contains(QStringLiteral(" elapsed")),
             qPrintable(window.jobProgress()->text()));
    QVERIFY(loaded.wait(30000));
    QCOMPARE(loaded.size(), 1);
    QVERIFY(!window.isBusy());
    QVERIFY(!window.jobProgress()->isVisible());

    QCOMPARE(window.layerModel()->rowCount(), 4);
    QCOMPARE(window.layerModel()->columnCount(), int(LayerTableModel::ColumnCount));
    // The table lists the quantizable layers (conv1, fc) until "Show all nodes" is checked.
    QCOMPARE(window.layerTable()->model()->rowCount(), 2);
    window.showAllNodesBox()->setChecked(true);
    QCOMPARE(window.layerTable()->model()->rowCount(), 4);
    QCOMPARE(window.layerTable()->model()->data(window.layerTable()->model()->index(3, 0)),
             QVariant(QStringLiteral("fc")));
    QCOMPARE(window.layerTable()->model()->data(window.layerTable()->model()->index(3, 4)),
             QVariant(QStringLiteral("1,450")));
    QCOMPARE(window.modelSizeText(), QStringLiteral("Model: 1,490 params · 5.8 KiB"));
    QCOMPARE(window.windowTitle(), QStringLiteral("small-cnn — %1 — BitLens").arg(m_small));

    // The first layer is selected and its details list its weight tensors.
    auto* details = window.layerDetails();
    QCOMPARE(details->value(QStringLiteral("Name")), QStringLiteral("conv1"));
    QCOMPARE(details->value(QStringLiteral("Op")), QStringLiteral("Conv"));
    QCOMPARE(details->value(QStringLiteral("Output")), QStringLiteral("[1, 4, 6, 6]"));
    QCOMPARE(details->value(QStringLiteral("Params")), QStringLiteral("40"));
    QCOMPARE(details->value(QStringLiteral("Bytes")), QStringLiteral("160 B"));
    QTreeWidget* weights = details->weightList();
    QCOMPARE(weights->topLevelItemCount(), 2);
    QCOMPARE(weights->topLevelItem(0)->text(0), QStringLiteral("conv1.weight"));
    QCOMPARE(weights->topLevelItem(0)->text(1), QStringLiteral("float32"));
    QCOMPARE(weights->topLevelItem(0)->text(2), QStringLiteral("[4, 1, 3, 3]"));
    QCOMPARE(weights->topLevelItem(0)->text(3), QStringLiteral("144 B"));
    QCOMPARE(weights->topLevelItem(1)->text(0), QStringLiteral("conv1.bias"));

    // Selecting another layer updates the details.
    window.layerTable()->setCurrentIndex(window.layerTable()->model()->index(3, 0));
    QCOMPARE(details->value(QStringLiteral("Name")), QStringLiteral("fc"));
    QCOMPARE(details->value(QStringLiteral("Params")), QStringLiteral("1,450"));
    QCOMPARE(details->value(QStringLiteral("Bytes")), QStringLiteral("5.7 KiB (5,800 B)"));
    QCOMPARE(weights->topLevelItemCount(), 2);
    QCOMPARE(weights->topLevelItem(0)->text(2), QStringLiteral("[10, 144]"));
    window.layerTable()->setCurrentIndex(window.layerTable()->model()->index(1, 0));
    QCOMPARE(details->value(QStringLiteral("Name")), QStringLiteral("relu1"));
    QVERIFY(weights->isHidden());

    QVERIFY(window.deviceText().startsWith(QStringLiteral("Device: ")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.deviceText().contains(QStringLiteral("detecting")), 10000);
}

void TestMainWindow::badFileKeepsOpenModel()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    openAndWait(window, m_small);
    const QString title = window.windowTitle();

    QSignalSpy errors(&window, &MainWindow::errorShown);
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    window.openModel(m_truncated);
    QVERIFY(errors.wait(30000));
    const QString message = errors.at(0).at(0).toString();
    const QString reason = coreReason(m_truncated);
    QVERIFY2(!reason.isEmpty(), "the core must reject a truncated model");
    QCOMPARE(message, QStringLiteral("Could not open model “%1”: %2").arg(m_truncated, reason));
    QCOMPARE(window.lastError(), message);
    QCOMPARE(loaded.size(), 0);

    // The model that was open is still what the window shows.
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);
    QCOMPARE(window.layerModel()->rowCount(), 4);
    QCOMPARE(window.windowTitle(), title);
    QCOMPARE(window.modelSizeText(), QStringLiteral("Model: 1,490 params · 5.8 KiB"));
}

void TestMainWindow::missingFileKeepsOpenModel()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    openAndWait(window, m_small);

    QSignalSpy errors(&window, &MainWindow::errorShown);
    const QString missing = m_dir.filePath(QStringLiteral("missing.onnx"));
    window.openModel(missing);
    QVERIFY(errors.wait(30000));
    QCOMPARE(errors.at(0).at(0).toString(),
             QStringLiteral("Could not open model “%1”: cannot open file: no such file")
                 .arg(missing));
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);
    QCOMPARE(window.layerModel()->rowCount(), 4);
}

void TestMainWindow::lastRequestWins()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QSignalSpy dropped(window.modelJobs(), &JobRunner::resultDropped);

    // Two requests in quick succession: only the second may reach the screen.
    window.openModel(m_small);
    window.openModel(m_wide);
    QVERIFY(loaded.wait(30000));
    settle(window);
    QCOMPARE(loaded.size(), 1);
    QCOMPARE(dropped.size(), 1);
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_wide);
    QCOMPARE(window.modelSizeText(), QStringLiteral("Model: 2,970 params · 11.6 KiB"));

    // And the other way round.
    window.openModel(m_wide);
    window.openModel(m_small);
    QVERIFY(loaded.wait(30000));
    settle(window);
    QCOMPARE(loaded.size(), 2);
    QCOMPARE(dropped.size(), 2);
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);
    QCOMPARE(window.modelSizeText(), QStringLiteral("Model: 1,490 params · 5.8 KiB"));
}

void TestMainWindow::cancelKeepsOpenModel()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    window.show();
    openAndWait(window, m_small);

    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QSignalSpy errors(&window, &MainWindow::errorShown);
    window.openModel(m_wide);
    QVERIFY(window.jobProgress()->isVisible());
    QTest::mouseClick(window.jobProgress()->cancelButton(), Qt::LeftButton);
    QVERIFY(!window.isBusy());
    QVERIFY(!window.jobProgress()->isVisible());
    settle(window);
    QCOMPARE(loaded.size(), 0);
    QCOMPARE(errors.size(), 0);
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);
}

void TestMainWindow::cancelStopsZooTraining()
{
    const QString fashion = qEnvironmentVariableIsSet("BITLENS_FASHION_MNIST")
                                ? qEnvironmentVariable("BITLENS_FASHION_MNIST")
                                : QStringLiteral("/usr/share/datasets/fashion-mnist");
    if (!QFileInfo::exists(fashion + QStringLiteral("/train-images-idx3-ubyte.gz")))
        QSKIP("Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)");
    QTemporaryDir cache;
    QVERIFY(cache.isValid());
    const QByteArray oldCache = qgetenv("BITLENS_CACHE");
    qputenv("BITLENS_CACHE", cache.path().toUtf8());

    MainWindow window;
    window.setDialogsEnabled(false);
    openAndWait(window, m_small);
    QSignalSpy errors(&window, &MainWindow::errorShown);
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QString stage;
    connect(window.modelJobs(), &JobRunner::progressed, this,
            [&stage](quint64, double, const QString& text) { stage = text; });

    // An empty cache: the demo model trains first. Cancel once training has started.
    window.openModel(QStringLiteral("fashion-cnn"));
    QVERIFY(window.jobProgress()->text().startsWith(QStringLiteral("Building fashion-cnn")));
    QTRY_VERIFY_WITH_TIMEOUT(stage.startsWith(QStringLiteral("training")), 120000);
    QElapsedTimer stopping;
    stopping.start();
    window.jobProgress()->cancelButton()->click();
    QVERIFY(window.modelJobs()->waitForWorkers(60000));
    qInfo("training stopped %lld ms after Cancel", static_cast<long long>(stopping.elapsed()));
    QVERIFY(stopping.elapsed() < 10000);
    settle(window);
    QCOMPARE(loaded.size(), 0);
    QCOMPARE(errors.size(), 0);
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);
    QVERIFY(!QFileInfo::exists(cache.filePath(QStringLiteral("zoo/fashion-cnn/model.onnx"))));

    if (oldCache.isNull())
        qunsetenv("BITLENS_CACHE");
    else
        qputenv("BITLENS_CACHE", oldCache);
}

void TestMainWindow::opensData()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&window, &MainWindow::dataLoaded);
    window.openData(m_npy);
    QVERIFY(loaded.wait(30000));
    auto* panel = window.dataPanel();
    QCOMPARE(panel->value(QStringLiteral("Path")), QStringLiteral("images.npy"));
    QCOMPARE(panel->value(QStringLiteral("Kind")), QStringLiteral("npy"));
    QCOMPARE(panel->value(QStringLiteral("Samples")), QStringLiteral("5"));
    QCOMPARE(panel->value(QStringLiteral("Sample shape")), QStringLiteral("[1, 8, 8]"));
    QCOMPARE(panel->value(QStringLiteral("Classes")), QStringLiteral("unlabelled"));
    QCOMPARE(window.currentData()->samples, 5);
}

void TestMainWindow::badDataKeepsOpenData()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&window, &MainWindow::dataLoaded);
    window.openData(m_npy);
    QVERIFY(loaded.wait(30000));

    QSignalSpy errors(&window, &MainWindow::errorShown);
    const QString missing = m_dir.filePath(QStringLiteral("missing.npy"));
    window.openData(missing);
    QVERIFY(errors.wait(30000));
    const QString message = errors.at(0).at(0).toString();
    QVERIFY2(message.startsWith(QStringLiteral("Could not open data “%1”: ").arg(missing)),
             qPrintable(message));
    QVERIFY(message.size() > QStringLiteral("Could not open data “%1”: ").arg(missing).size());
    QCOMPARE(window.dataPanel()->value(QStringLiteral("Samples")), QStringLiteral("5"));
}

void TestMainWindow::dropOpensModel()
{
    MainWindow window;
    window.setDialogsEnabled(false);
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    QSignalSpy dataLoaded(&window, &MainWindow::dataLoaded);
    // Qt routes a drop to the widget that accepted the drag-enter before it.
    const auto dropFile = [&window](const QString& path) {
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(path)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton,
                              Qt::NoModifier);
        QApplication::sendEvent(&window, &enter);
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(&window, &drop);
        return enter.isAccepted() && drop.isAccepted();
    };
    QVERIFY(dropFile(m_small));
    QVERIFY(loaded.wait(30000));
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_small);

    // A dropped .npy is data, not a model.
    QVERIFY(dropFile(m_npy));
    QVERIFY2(dataLoaded.wait(30000), qPrintable(window.lastError()));
    QCOMPARE(loaded.size(), 1);
    QCOMPARE(window.currentData()->samples, 5);
}

void TestMainWindow::recentFilesReopen()
{
    {
        MainWindow window;
        window.setDialogsEnabled(false);
        openAndWait(window, m_wide);
        openAndWait(window, m_small);
        QSignalSpy errors(&window, &MainWindow::errorShown);
        window.openModel(m_truncated);
        QVERIFY(errors.wait(30000));
    }
    // Persisted in QSettings, newest first; failed opens are not remembered.
    const QStringList stored = QSettings(QStringLiteral("BitLens"), QStringLiteral("BitLens"))
                                   .value(QStringLiteral("recentModels"))
                                   .toStringList();
    QCOMPARE(stored, (QStringList{m_small, m_wide}));

    // A new window lists them and opens one when its action is triggered.
    MainWindow window;
    window.setDialogsEnabled(false);
    QAction* wideAction = nullptr;
    for (QAction* action : window.recentFilesMenu()->actions())
        if (action->data().toString() == m_wide)
            wideAction = action;
    QVERIFY(wideAction);
    QVERIFY(wideAction->text().contains(QStringLiteral("wide.onnx")));
    QSignalSpy loaded(&window, &MainWindow::modelLoaded);
    wideAction->trigger();
    QVERIFY(loaded.wait(30000));
    QCOMPARE(QString::fromStdString(window.currentModel()->model->path()), m_wide);
}

QTEST_MAIN(TestMainWindow)
#include "test_main_window.moc"
